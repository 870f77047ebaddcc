"""Text-line crops for the print reader, cut from the cached catalog faces, plus synthetic lines.

Ground truth comes from the catalog records, formatted exactly as `cardrender.py` prints it (name and
`HP n` on one line; the set code then the collector number `025/198`, or the raw number). Each crop is
taken the way the reader takes it, from a misaligned face: the crop's residual vertical offset is within
the reader's search step for most samples (label: the text), and far off for some (label: empty), so the
model learns to read only a centred line, which lets the reader pick the most confident of its offsets.
Synthetic lines drawn with the renderer's own fonts cover characters and numbers the catalog rarely has;
with `p_photo`, faces come from the scanner's view of synthetic phone photos (`training.synth`) too.
Every sample is a pure function of its seed: training seeds are < 9,000,000, evaluation seeds >= 10,000,000.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import math
import string
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import cv2
import numpy as np
import torch
from PIL import Image, ImageDraw, ImageFont

from catalog_api.ingest.feed import card_name, feed_path, read_jsonl
from core.cardtext import footer_line, printed_number
from models.geometry import read_face
from models.ocr import CANVAS_H, CANVAS_W, FOOTER, NAME, Region, region_quad, warp
from models.ocr_net import to_tensor
from training.renders import SHARED, load_renderer
from training.synth import Difficulty, photo_view

TRAIN_SEED_LIMIT = 9_000_000  # evaluation starts at 10,000,000; in-training validation at 19,000,000
EVAL_SEED_BASE = 10_000_000
# Everything the catalog prints in these lines (its katakana renders as the font's missing-glyph box, so
# it is left out) plus the French accents and punctuation a new card could bring.
VOCAB = string.digits + string.ascii_letters + " !\"#%&'()+,-./:;?[]_" + "ÀÂÇÈÉÊàâçèéêëîïôùûü" + "αβγδ—’◇★☆♀♂"
RARE = "!\"#%&'()+,-./:;?[]_ÀÂÇÈÉÊàâçèéêëîïôùûüαβγδ—’◇★☆♀♂"


@dataclass(frozen=True)
class CardText:
    """One catalog card's print, as the reader should return it."""

    card_id: str
    name: str
    hp: str | None  # "60": printed as "HP 60" on the name line
    set_code: str | None  # None where the expansion prints a symbol
    number: str  # as printed: "025/198", "TG05"

    @property
    def name_line(self) -> str:
        return f"{self.name} HP {self.hp}" if self.hp else self.name

    @property
    def footer_line(self) -> str:
        return footer_line(self.set_code, self.number, None)


def is_eval_card(card_id: str) -> bool:
    """Hold out a tenth of the cards, by a hash of the id (stable across catalog updates)."""
    return int(hashlib.sha1(card_id.encode()).hexdigest(), 16) % 10 == 0


def catalog_texts(catalog: Path) -> dict[str, CardText]:
    """Card id -> printed lines, for every card whose lines the vocabulary can spell."""
    expansions = {e["id"]: e for e in read_jsonl(feed_path(catalog, "expansions"))}
    out = {}
    for card in read_jsonl(feed_path(catalog, "cards")):
        exp = expansions.get(card["expansion_id"]) or {}
        hp = card.get("hp")
        number = printed_number(str(card.get("number") or ""), exp.get("card_count_official"))
        text = CardText(
            card["id"],
            card_name(card),
            str(int(hp)) if isinstance(hp, (int, float)) else None,
            exp.get("code") or None,
            number,
        )
        if set(text.name_line + text.footer_line) <= set(VOCAB):
            out[card["id"]] = text
    return out


# ---------------------------------------------------------------- degradations (faces or crops)
def glare(img: np.ndarray, rng: np.random.Generator, peak: float) -> np.ndarray:
    """A soft bright streak at a random angle, like a reflection on a sleeve."""
    h, w = img.shape[:2]
    angle = rng.uniform(0, math.pi)
    nx, ny = math.cos(angle), math.sin(angle)
    x0, y0 = rng.uniform(0, w), rng.uniform(0, h)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    width = rng.uniform(0.05, 0.4) * max(h, w)
    alpha = peak * np.exp(-((((xx - x0) * nx + (yy - y0) * ny) / width) ** 2))[..., None]
    tint = np.array([255, 255, rng.uniform(225, 255)], np.float32)
    return img * (1 - alpha) + tint * alpha


def degrade(
    img: np.ndarray, rng: np.random.Generator, scale: float = 1.0, glare_peak: float = 0.6
) -> np.ndarray:
    """Photo-like damage: colour, glare, blur, lost resolution, noise, JPEG (`scale`: px per canvas px)."""
    out: np.ndarray = img.astype(np.float32)
    if rng.random() < 0.85:
        out = (out - 128.0) * rng.uniform(0.6, 1.25) + 128.0 + rng.uniform(-40, 40)
        out *= rng.uniform(0.82, 1.18, size=3).astype(np.float32)
    if rng.random() < 0.3:
        out = 255.0 * (np.clip(out, 0, 255) / 255.0) ** rng.uniform(0.7, 1.45)
    if rng.random() < 0.2:
        out = glare(out, rng, rng.uniform(0.2, glare_peak))
    out = np.clip(out, 0, 255).astype(np.uint8)
    if rng.random() < 0.6:
        out = cv2.GaussianBlur(out, (0, 0), rng.uniform(0.3, 1.5) * scale)
    if rng.random() < 0.35:
        f = rng.uniform(0.45, 0.85)
        h, w = out.shape[:2]
        small = cv2.resize(out, (max(8, round(w * f)), max(8, round(h * f))), interpolation=cv2.INTER_AREA)
        out = cv2.resize(small, (w, h), interpolation=cv2.INTER_LINEAR)
    if rng.random() < 0.6:
        out = np.clip(out + rng.normal(0, rng.uniform(2, 12), out.shape), 0, 255).astype(np.uint8)
    if rng.random() < 0.6:
        ok, buf = cv2.imencode(".jpg", out, [cv2.IMWRITE_JPEG_QUALITY, int(rng.integers(25, 91))])
        out = np.asarray(cv2.imdecode(buf, cv2.IMREAD_UNCHANGED)) if ok else out
    return out


def misalign_face(face: np.ndarray, rng: np.random.Generator, amount: float = 0.02) -> np.ndarray:
    """A rectifier's error: shift and scale up to `amount`, a little rotation and perspective."""
    h, w = face.shape[:2]
    s = 1 + rng.uniform(-amount, amount)
    rot = math.radians(rng.uniform(-1.0, 1.0))
    c = np.array([w / 2, h / 2], np.float32)
    corners = np.array([[0, 0], [w, 0], [w, h], [0, h]], np.float32) - c
    r = np.array([[math.cos(rot), -math.sin(rot)], [math.sin(rot), math.cos(rot)]], np.float32)
    moved = (
        corners @ r.T * s
        + c
        + np.array([rng.uniform(-amount, amount) * w, rng.uniform(-amount, amount) * h], np.float32)
    )
    moved += rng.normal(0, 0.004 * w, (4, 2)).astype(np.float32)
    matrix = cv2.getPerspectiveTransform(corners + c, moved.astype(np.float32))
    return cv2.warpPerspective(face, matrix, (w, h), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)


# ---------------------------------------------------------------- where each glyph is
BOLD = "DejaVuSans-Bold.ttf"
FONTS = SHARED / "tools" / "fonts"
STRIDE = 4  # input columns per CRNN time step (MobileNetV3-small, docTR's rect strides)
IGNORE = -100


@functools.lru_cache(maxsize=64)
def font(size: int) -> ImageFont.FreeTypeFont:
    return ImageFont.truetype(str(FONTS / BOLD), size)


def _centres(text: str, x0: float, f: ImageFont.FreeTypeFont) -> list[float]:
    edges = [x0 + f.getlength(text[:i]) for i in range(len(text) + 1)]
    return [(a + b) / 2 for a, b in itertools.pairwise(edges)]


def name_layout(name: str, hp: str | None) -> tuple[list[float], float]:
    """Canvas x of each glyph of the name line (as cardrender.py lays it out), and the line's y."""
    width = CANVAS_W - 80 - (130 if hp else 0)
    size = next((s for s in range(32, 10, -1) if font(s).getlength(name) <= width), 10)
    xs = _centres(name, 34, font(size))
    if hp:
        hp_text = f"HP {hp}"
        x_hp = CANVAS_W - 78 - font(24).getlength(hp_text)
        xs += [(34 + font(size).getlength(name) + x_hp) / 2, *_centres(hp_text, x_hp, font(24))]
    return xs, 42 + 0.6 * size


def footer_layout(code: str | None, number: str) -> tuple[list[float], float]:
    """Canvas x of each glyph of the footer line: code (in its box), the gap, the number; and its y."""
    if not code:
        return _centres(number, 66, font(15)), 785.0
    num_x = 64 + font(15).getlength(code)
    gap = (44 + font(15).getlength(code) + num_x) / 2
    return [*_centres(code, 44, font(15)), gap, *_centres(number, num_x, font(15))], 785.0


def frame_targets(
    text: str, xs: list[float], y: float, quad: np.ndarray | None, region: Region, vocab: str
) -> np.ndarray:
    """Per-time-step targets (glyph at its centre, blank elsewhere, neighbours ignored) for the crop `quad`.

    CTC alone from scratch sat on its all-blank plateau for the whole CPU budget; telling the network
    where each glyph is (we drew them, so we know) gets it past that in a few hundred steps.
    """
    h, w = region.size
    steps = w // STRIDE
    out = np.full(steps, len(vocab), np.int64)
    if not text or quad is None:
        return out
    matrix = cv2.getPerspectiveTransform(quad, np.array([[0, 0], [w, 0], [w, h], [0, h]], np.float32))
    pts = cv2.perspectiveTransform(np.array([[[x, y] for x in xs]], np.float32), matrix)[0]
    cols = np.clip((pts[:, 0] / STRIDE).astype(int), 0, steps - 1)
    for c in cols:
        for n in (c - 1, c + 1):
            if 0 <= n < steps and out[n] == len(vocab):
                out[n] = IGNORE
    for ch, c in zip(text, cols, strict=True):
        out[c] = vocab.index(ch)
    return out


# ---------------------------------------------------------------- crops
@dataclass(frozen=True)
class Jitter:
    """How far a training crop may sit from its line: `pos` px still reads, `neg` range reads empty."""

    pos: float
    neg: tuple[float, float]


JITTER = {"name": Jitter(10.0, (22.0, 44.0)), "footer": Jitter(5.0, (11.0, 30.0))}


def jitter_quad(region: Region, rng: np.random.Generator, dy: float, level: float = 1.0) -> np.ndarray:
    """The region's quad after residual misalignment: shift, ±3% scale, ~1° rotation, corner wobble."""
    k = 0.3 + 0.7 * level
    quad = region_quad(region, dx=k * rng.uniform(-12, 12), dy=dy)
    centre = quad.mean(axis=0)
    rot = math.radians(k * rng.uniform(-1.0, 1.0))
    r = np.array([[math.cos(rot), -math.sin(rot)], [math.sin(rot), math.cos(rot)]], np.float32)
    quad = (quad - centre) @ r.T * (1 + k * rng.uniform(-0.03, 0.03)) + centre
    return (quad + k * rng.normal(0, 0.8, (4, 2))).astype(np.float32)


def line_crop(
    image: np.ndarray,
    region: Region,
    line: tuple[str, list[float], float],
    rng: np.random.Generator,
    origin_y: float,
    p_negative: float,
    level: float = 1.0,
    p_degrade: float = 0.85,
    clean: np.ndarray | None = None,
    legible: float = 0.0,
) -> tuple[np.ndarray, str, np.ndarray]:
    """A crop of `region` from a canvas-scale image (or band), and what the model should read in it.

    `level` in [0, 1] is the curriculum: early steps see centred, mostly clean crops, because a CTC model
    from scratch first has to find where glyphs are before it can cope with damage. `clean`: the rendered
    face that `image` is a photo of; a crop whose likeness to the same crop of it falls below `legible`
    (`legibility`) is labelled empty, so the reader learns to say nothing where a photo washed the line out
    instead of guessing it.
    """
    jitter = JITTER[region.name]
    text, xs, y = line
    if rng.random() < p_negative * level:
        dy, text = float(rng.choice([-1, 1]) * rng.uniform(*jitter.neg)), ""
    else:
        dy = (0.3 + 0.7 * level) * rng.uniform(-jitter.pos, jitter.pos)
    quad = jitter_quad(region, rng, dy, level)
    crop = warp(image, quad, region.size, origin_y)
    reference = warp(clean, quad, region.size, origin_y) if legible > 0 and clean is not None else None
    if text and reference is not None and legibility(crop, reference) < legible:
        text = ""
    if rng.random() < 0.2 + (p_degrade - 0.2) * level:
        crop = degrade(crop, rng, scale=region.size[0] / (region.box[3] - region.box[1]))
    return crop, text, frame_targets(text, xs, y, quad, region, VOCAB)


def legibility(crop: np.ndarray, clean: np.ndarray) -> float:
    """How much of a clean crop's pattern a photo's crop of the same place still shows: the normalised
    cross-correlation of their grey levels (1: all of it, ~0: none). On 240 training cards' phone photos
    (docs/hard-photos.md) the shipped reader read no footer exactly below 0.7, and by eye footers below ~0.5
    are blur, noise or glare with at most a faint box left."""
    a = cv2.cvtColor(crop, cv2.COLOR_RGB2GRAY).astype(np.float32)
    b = cv2.cvtColor(clean, cv2.COLOR_RGB2GRAY).astype(np.float32)
    a -= a.mean()
    b -= b.mean()
    return float((a * b).sum() / math.sqrt(float((a * a).sum()) * float((b * b).sum()) + 1e-6))


def background_crop(region: Region, rng: np.random.Generator) -> np.ndarray:
    """A crop with no text at all (flat, noisy or gradient): the reader must say nothing."""
    h, w = region.size
    base = rng.uniform(40, 230, size=3).astype(np.float32)
    img = np.broadcast_to(base, (h, w, 3)).copy()
    if rng.random() < 0.5:
        img += np.linspace(-40, 40, w, dtype=np.float32)[None, :, None] * rng.uniform(-1, 1)
    img += rng.normal(0, rng.uniform(0, 20), img.shape)
    return degrade(np.clip(img, 0, 255).astype(np.uint8), rng)


# ---------------------------------------------------------------- synthetic lines
NAME_BAND = (0, 150)  # canvas rows drawn for a synthetic name line
FOOTER_BAND = (700, CANVAS_H)


class Synth:
    """Draws name and footer bands the way cardrender.py does, with random text."""

    def __init__(self, renderer: ModuleType, codes: list[str], names: list[str]) -> None:
        self.r, self.codes, self.names = renderer, codes, names

    def _background(self, rng: np.random.Generator, rows: tuple[int, int]) -> Image.Image:
        h = rows[1] - rows[0]
        border = self.r.BORDERS[int(rng.integers(2))]
        frame = list(self.r.TYPE_COLOURS.values())[int(rng.integers(len(self.r.TYPE_COLOURS)))]
        frame = self.r._lerp(frame, (255, 255, 255), 0.25)
        img = Image.new("RGB", (CANVAS_W, h), border)
        d = ImageDraw.Draw(img, "RGBA")
        d.rounded_rectangle([16, 16 - rows[0], CANVAS_W - 17, CANVAS_H - 17 - rows[0]], radius=14, fill=frame)
        if rng.random() < 0.25:  # full-art: busy art under a translucent panel
            art = rng.uniform(0, 255, (h // 8 + 1, CANVAS_W // 8 + 1, 3)).astype(np.uint8)
            art_img = Image.fromarray(cv2.resize(art, (CANVAS_W - 40, h), interpolation=cv2.INTER_CUBIC))
            img.paste(art_img, (20, 0))
            d = ImageDraw.Draw(img, "RGBA")
            d.rectangle([26, 0, CANVAS_W - 27, h], fill=(255, 255, 255, 150))
        return img

    def _word(self, rng: np.random.Generator) -> str:
        if rng.random() < 0.5:
            return str(rng.choice(self.names)).split(" ")[0]
        n = int(rng.integers(1, 10))
        pool = string.ascii_lowercase * 3 + RARE + string.digits
        first = str(rng.choice(list(string.ascii_uppercase + RARE)))
        return first + "".join(rng.choice(list(pool), size=n - 1))

    def name_band(self, rng: np.random.Generator) -> tuple[np.ndarray, str, str | None]:
        """A header band: kind label, a random name (rare glyphs likely), maybe `HP n` and the dot."""
        img = self._background(rng, NAME_BAND)
        d = ImageDraw.Draw(img, "RGBA")
        d.text(
            (34, 26),
            str(rng.choice(["BASIC", "STAGE 1", "STAGE 2", "TRAINER · ITEM", "ENERGY"])),
            font=self.r._font("DejaVuSans-Bold.ttf", 12),
            fill=(30, 30, 30),
        )
        name = " ".join(self._word(rng) for _ in range(int(rng.integers(1, 4))))
        hp_value = str(int(rng.integers(3, 35)) * 10) if rng.random() < 0.7 else None
        hp = f"HP {hp_value}" if hp_value else ""
        font = self.r._fit(d, name, "DejaVuSans-Bold.ttf", 32, CANVAS_W - 80 - (130 if hp else 0))
        d.text((34, 42), name, font=font, fill=(15, 15, 15))
        if hp:
            f = self.r._font("DejaVuSans-Bold.ttf", 24)
            d.text((CANVAS_W - 78 - d.textlength(hp, font=f), 46), hp, font=f, fill=(170, 20, 20))
            self.r._energy_dot(d, CANVAS_W - 52, 60, 15, str(rng.choice(list(self.r.TYPE_COLOURS))))
        return np.asarray(img), name, hp_value

    def _number(self, rng: np.random.Generator) -> str:
        kind = rng.random()
        if kind < 0.45:
            total = int(rng.integers(5, 400))
            return printed_number(str(int(rng.integers(1, total + 60))), total)
        prefix = "".join(rng.choice(list(string.ascii_uppercase), size=int(rng.integers(0, 5))))
        digits = str(int(rng.integers(0, 400))).zfill(int(rng.integers(1, 4)))
        suffix = str(rng.choice(list(string.ascii_lowercase))) if rng.random() < 0.15 else ""
        return prefix + digits + suffix if rng.random() < 0.95 else str(rng.choice(["!", "?", "ONE", "A"]))

    def footer_band(self, rng: np.random.Generator) -> tuple[np.ndarray, str | None, str]:
        """A footer band: illustrator, set code box (or symbol), a random number, rarity, flavour."""
        y0 = FOOTER_BAND[0]
        img = self._background(rng, FOOTER_BAND)
        d = ImageDraw.Draw(img, "RGBA")
        foot = self.r._font("DejaVuSans.ttf", 12)
        if rng.random() < 0.8:
            d.text((40, 752 - y0), f"Illus. {rng.choice(self.names)}", font=foot, fill=(30, 30, 30))
        if rng.random() < 0.3:
            flavour = self.r._font("DejaVuSans-Oblique.ttf", 10)
            for i in range(2):
                d.text(
                    (300, 752 - y0 + 12 * i), str(rng.choice(self.names)) * 3, font=flavour, fill=(50, 50, 50)
                )
        if rng.random() < 0.6:
            code = str(rng.choice(self.codes))
        else:
            alphabet = list(string.ascii_uppercase * 3 + string.digits + "-")
            code = "".join(rng.choice(alphabet, size=int(rng.integers(1, 6)))).strip("-") or "X"
        font = self.r._font("DejaVuSans-Bold.ttf", 15)
        number = self._number(rng)
        if rng.random() < 0.8:
            d.rounded_rectangle(
                [36, 774 - y0, 44 + d.textlength(code, font=font) + 8, 796 - y0], radius=4, fill=(30, 30, 30)
            )
            d.text((44, 776 - y0), code, font=font, fill=(245, 245, 245))
            num_x, shown = 64 + d.textlength(code, font=font), code
        else:
            self.r._set_symbol(d, 48, 785 - y0, 10, str(rng.integers(1 << 30)))
            num_x, shown = 66, None
        d.text((num_x, 776 - y0), number, font=font, fill=(15, 15, 15))
        if rng.random() < 0.6:
            mark = "●◆★"[int(rng.integers(3))]
            d.text(
                (CANVAS_W - 70, 774 - y0), mark, font=self.r._font("DejaVuSans.ttf", 18), fill=(20, 20, 20)
            )
        return np.asarray(img), shown, number


# ---------------------------------------------------------------- the sampler
Line = tuple[np.ndarray, str, np.ndarray]  # crop, what it reads, per-time-step targets


class LineSampler:
    """seed -> {"name": line, "footer": line}: both lines of one face (or of synthetic bands)."""

    def __init__(self, faces: Path, texts: dict[str, CardText], ids: list[str], cfg: dict[str, Any]) -> None:
        self.faces, self.texts, self.ids, self.cfg = faces, texts, ids, cfg
        self.coded = [i for i in ids if texts[i].set_code]  # for `p_coded`: faces whose footer has a code box
        renderer = load_renderer()
        # The renderer opens a font file per call; at GPU-box sample rates (~100/s per worker) a data worker
        # died after ~7 min with "cannot open resource". Sizes are small integers, so a cache is bounded.
        renderer.__dict__["_font"] = functools.lru_cache(maxsize=256)(renderer.__dict__["_font"])
        codes = sorted({t.set_code for t in texts.values() if t.set_code})
        names = sorted({t.name for t in texts.values()})
        self.synth = Synth(renderer, codes, names)

    def __call__(self, seed: int, level: float = 1.0) -> dict[str, Line]:
        rng = np.random.default_rng(seed)
        p_neg, p_bg, p_syn = self.cfg["p_negative"], self.cfg["p_background"], self.cfg["p_synthetic"]
        # `p_coded` (0 by default, which keeps every seed's sample as it was) draws that share of the faces
        # from the cards that print a set code: more code-box crops for the reader's weakest field
        p_coded = float(self.cfg.get("p_coded", 0.0))
        pool = self.coded if p_coded and self.coded and rng.random() < p_coded else self.ids
        card = self.texts[pool[int(rng.integers(len(pool)))]]
        face = read_face(self.faces / card.card_id / "high.jpg")
        p_degrade = self.cfg.get("p_degrade", 0.85)
        # `p_photo` (0 by default, which keeps every seed's sample as it was): that share of faces is the
        # scanner's rectified view of a synthetic phone photo (`training.synth`), with its glare bands over
        # the text, sleeves, fingers, blur and JPEG; those crops are already damaged, so `photo_degrade`
        # (which a synthetic band drawn in the photo's place takes too: cpu-hard.yaml was trained so).
        p_photo = float(self.cfg.get("p_photo", 0.0))
        clean: np.ndarray | None = None
        if p_photo and rng.random() < p_photo:
            clean, face = face, self.photo_face(face, seed, rng)
            p_degrade = self.cfg.get("photo_degrade", 0.0)
        # `photo_legible` (0 by default: every photo crop keeps its text, as cpu-hard.yaml trained): a photo
        # crop less like the rendered face's than this reads empty (`legibility`).
        legible = float(self.cfg.get("photo_legible", 0.0))
        out: dict[str, Line] = {}
        for region in (NAME, FOOTER):
            if rng.random() < p_bg * level:
                out[region.name] = (
                    background_crop(region, rng),
                    "",
                    frame_targets("", [], 0, None, region, VOCAB),
                )
                continue
            image, origin, reference = face, 0.0, clean
            if region is NAME:
                name, hp = card.name, card.hp
                if rng.random() < p_syn:
                    image, name, hp = self.synth.name_band(rng)
                    origin, reference = float(NAME_BAND[0]), None
                line = (f"{name} HP {hp}" if hp else name, *name_layout(name, hp))
            else:
                code, number = card.set_code, card.number
                if rng.random() < p_syn:
                    image, code, number = self.synth.footer_band(rng)
                    origin, reference = float(FOOTER_BAND[0]), None
                line = (f"{code} {number}" if code else number, *footer_layout(code, number))
            out[region.name] = line_crop(
                image, region, line, rng, origin, p_neg, level, p_degrade, reference, legible
            )
        return out

    def photo_face(self, face: np.ndarray, seed: int, rng: np.random.Generator) -> np.ndarray:
        """A phone photo of `face` as the scanner rectifies it, from the photo's true corners: the crops'
        own jitter stands for the detector's error, as on rendered faces. `photo_hard_p` of the photos are
        hard, and `photo_hard_v1_p` of those come from the bucket before #13's (`hard-v1`), so the reader
        keeps what it read there. `photo_scale` composes the photo smaller than the benchmark's 12 MP."""
        hard = rng.random() < float(self.cfg.get("photo_hard_p", 0.7))
        older = rng.random() < float(self.cfg.get("photo_hard_v1_p", 0.3))
        kind: Difficulty = ("hard-v1" if older else "hard") if hard else "standard"
        return photo_view(face, seed, kind, float(self.cfg.get("photo_scale", 1.0)), 0.0)


def collate(rows: list[dict[str, Line]], norm: tuple[Any, Any]) -> dict[str, Any]:
    """Samples -> per-line-type tensors, texts and frame targets."""
    batch: dict[str, Any] = {}
    for key in ("name", "footer"):
        batch[key] = to_tensor([r[key][0] for r in rows], *norm)
        batch[f"{key}_text"] = [r[key][1] for r in rows]
        batch[f"{key}_frames"] = torch.from_numpy(np.stack([r[key][2] for r in rows]))
    return batch


class LineBatches(torch.utils.data.IterableDataset):
    """Batches for `steps` (seed = (step + seed_offset) * batch + i), so a resumed run sees new samples."""

    def __init__(
        self,
        sampler: LineSampler,
        batch: int,
        steps: range,
        ramp: int,
        norm: tuple[Any, Any],
        seed_offset: int = 0,
    ) -> None:
        super().__init__()
        if (steps.stop + seed_offset) * batch > TRAIN_SEED_LIMIT:
            raise ValueError(f"training seeds must stay below {TRAIN_SEED_LIMIT:,}")
        self.sampler, self.batch, self.steps, self.ramp, self.norm = sampler, batch, steps, ramp, norm
        self.seed_offset = seed_offset  # in steps: a run from trained weights sees samples they did not

    def __iter__(self) -> Iterator[dict[str, Any]]:
        cv2.setNumThreads(1)
        torch.set_num_threads(1)
        worker = torch.utils.data.get_worker_info()
        steps = self.steps if worker is None else self.steps[worker.id :: worker.num_workers]
        for step in steps:  # the DataLoader takes workers round-robin, so batches still arrive in step order
            level = min(1.0, step / max(1, self.ramp))
            first = (step + self.seed_offset) * self.batch
            yield collate([self.sampler(first + i, level) for i in range(self.batch)], self.norm)
