// cardcat console: search, card pages with prices, and scanning, all through /v1 with the user's key.
// No framework and no third-party code; the key lives in sessionStorage (this tab only), never on the
// server. Every failure is shown in words in #message (or beside what it concerns), never swallowed.
"use strict";

const KEY_STORAGE = "cardcat.apiKey";
const PAGE_SIZE = 30;
const SVG_NS = "http://www.w3.org/2000/svg";

// ---- the API --------------------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, code, message, retryAfter) {
    super(message);
    this.status = status;
    this.code = code;
    this.retryAfter = retryAfter;
  }
}

function currentKey() {
  return sessionStorage.getItem(KEY_STORAGE) || "";
}

async function api(path, options = {}) {
  const key = currentKey();
  if (!key) {
    throw new ApiError(0, "no_key", "Enter your API key at the top of the page first.", null);
  }
  const headers = { Authorization: `Bearer ${key}`, Accept: "application/json" };
  let response;
  try {
    response = await fetch(path, { ...options, headers, cache: "no-store" });
  } catch (error) {
    throw new ApiError(0, "network", `The service could not be reached (${error.message}).`, null);
  }
  let body = null;
  try {
    body = await response.json();
  } catch (error) {
    body = null;
  }
  if (response.ok && body && body.error === null) {
    return body.data;
  }
  throw refusal(response, body);
}

/** The ApiError for a refused call: the envelope's code and message, or the HTTP status's. */
function refusal(response, body) {
  const error = body && body.error ? body.error : {};
  return new ApiError(
    response.status,
    error.code || `http_${response.status}`,
    error.message || response.statusText || "no message",
    response.headers.get("Retry-After"),
  );
}

/** A failure in plain words: what happened and what to do. */
function describe(error) {
  if (!(error instanceof ApiError)) {
    return `Something went wrong in the page: ${error.message || error}`;
  }
  const said = error.message ? ` (The service said: “${error.message}”)` : "";
  switch (error.code) {
    case "no_key":
    case "network":
      return error.message;
    case "unauthorized":
      return `Your API key was refused: it is missing, unknown, revoked or expired. Enter a valid key at the top.${said}`;
    case "rate_limited": {
      const wait = error.retryAfter ? `${error.retryAfter} s` : "a moment";
      return `Too many requests: this key's request budget is spent. Try again in ${wait}.${said}`;
    }
    case "payload_too_large":
      return `That photo is too large: the scanner takes images up to 10 MB. Choose a smaller photo or lower the camera's resolution.${said}`;
    case "unsupported_image":
      return `That file is not an image the scanner can read: send a JPEG, PNG or WebP photo of at most 40 megapixels.${said}`;
    case "scan_unavailable":
      return `Scanning is not available on this deployment right now.${error.retryAfter ? ` Try again in ${error.retryAfter} s.` : ""}${said}`;
    case "not_found":
      return `Not found: nothing has that id.${said}`;
    case "bad_request":
      return `The service could not accept that request.${said}`;
    case "internal":
      return `The service failed while answering; try again.${said}`;
    default:
      return `The request failed with status ${error.status} (${error.code}).${said}`;
  }
}

// ---- small DOM helpers ----------------------------------------------------------------------------

function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "text") node.textContent = value;
    else node.setAttribute(name, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function svg(tag, attributes = {}, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
  for (const child of children) node.append(child instanceof Node ? child : document.createTextNode(child));
  return node;
}

function showMessage(text, kind = "error") {
  const box = document.getElementById("message");
  box.textContent = text;
  box.className = `message ${kind}`;
  box.hidden = false;
}

function clearMessage() {
  document.getElementById("message").hidden = true;
}

function reportFailure(error) {
  showMessage(describe(error));
  if (error instanceof ApiError && (error.code === "unauthorized" || error.code === "no_key")) {
    document.getElementById("key-input").focus();
  }
}

function dollars(cents) {
  return cents === null || cents === undefined ? "–" : `$${(cents / 100).toFixed(2)}`;
}

function cardImage(image, size, alt) {
  if (!image) return el("div", { class: "no-image", text: "no image" });
  return el("img", { src: image[size], alt, loading: "lazy" });
}

// ---- the key --------------------------------------------------------------------------------------

function showKeyState() {
  const key = currentKey();
  document.getElementById("key-state").textContent = key ? `using ${key.slice(0, 7)}…` : "no key yet";
}

function setUpKeyForm() {
  document.getElementById("key-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const input = document.getElementById("key-input");
    const key = input.value.trim();
    if (key) sessionStorage.setItem(KEY_STORAGE, key);
    input.value = "";
    showKeyState();
    clearMessage();
    route();
  });
  document.getElementById("key-forget").addEventListener("click", () => {
    sessionStorage.removeItem(KEY_STORAGE);
    showKeyState();
  });
  showKeyState();
}

// ---- routing: #/search?…, #/card/<id>, #/scan, #/batches[/<id>] -------------------------------------

// Each navigation gets a number; an answer that arrives after the user has moved on is dropped, so a
// slow first page can never overwrite the search typed after it.
let navigation = 0;

function stale(seen) {
  return seen !== navigation;
}

function route() {
  navigation += 1;
  const hash = location.hash || "#/search";
  const [path, query = ""] = hash.slice(1).split("?");
  const views = { search: "view-search", card: "view-card", scan: "view-scan", batches: "view-batches" };
  const name = path.split("/")[1] || "search";
  for (const [view, id] of Object.entries(views)) {
    document.getElementById(id).hidden = view !== name;
  }
  for (const link of document.querySelectorAll("[data-nav]")) {
    link.classList.toggle("active", link.dataset.nav === name);
  }
  clearMessage();
  if (name === "card") {
    const cardId = addressedCardId(path);
    if (cardId === null) showBadCardAddress();
    else showCard(cardId);
  } else if (name === "scan") {
    document.title = "Scan · cardcat console";
  } else if (name === "batches") {
    document.title = "Batches · cardcat console";
    const batchId = addressedId(path.split("/")[2] || "");
    if (batchId === null) {
      showBatch("");
      showMessage("That batch address is malformed: open the batch from its link again.");
    } else showBatch(batchId);
  } else {
    showSearch(new URLSearchParams(query));
  }
}

/** The card id in `#/card/<id>`, or null when its escapes are malformed (`%E0` alone is no UTF-8):
 * decodeURIComponent throws URIError on those, which left the route half-drawn with a page error. */
function addressedCardId(path) {
  return addressedId(path.split("/").slice(2).join("/"));
}

/** An id from the address, decoded, or null when its escapes are malformed. */
function addressedId(text) {
  try {
    return decodeURIComponent(text);
  } catch (error) {
    if (error instanceof URIError) return null;
    throw error;
  }
}

function showBadCardAddress() {
  document.title = "Not found · cardcat console";
  document.getElementById("card").replaceChildren(
    el("h1", { text: "No such card" }),
    el("p", {}, "This address names no card. ", el("a", { href: "#/search", text: "Search for it" }), "."),
  );
  showMessage("The card address is malformed (its %-escapes are not valid UTF-8), so it names no card.");
}

// ---- search ---------------------------------------------------------------------------------------

const search = { params: null, cursor: null, shown: 0, expansions: null };

/** The query the form describes: only the fields the user set (so an older server sees nothing new). */
function formQuery() {
  const form = document.getElementById("search-form");
  const query = new URLSearchParams();
  for (const field of form.querySelectorAll("input[name], select[name]")) {
    let value = field.value.trim();
    if (!value || field.disabled) continue;
    if (field.hasAttribute("data-cents")) value = String(Math.round(Number(value) * 100));
    query.set(field.name, value);
  }
  return query;
}

function fillForm(query) {
  const form = document.getElementById("search-form");
  for (const field of form.querySelectorAll("input[name], select[name]")) {
    const value = query.get(field.name) || "";
    field.value = field.hasAttribute("data-cents") && value ? (Number(value) / 100).toFixed(2) : value;
  }
  syncSortState();
}

function syncSortState() {
  // The API orders a search by score: any other sort with `q` is refused, so it is not offered.
  const sort = document.getElementById("sort");
  const searching = document.getElementById("q").value.trim() !== "";
  sort.disabled = searching;
}

/** The expansion list, fetched once (every caller awaits the same fetch; a failure lets a later try). */
function loadExpansions() {
  if (!currentKey()) return Promise.resolve();
  if (!search.expansions) {
    search.expansions = fetchExpansions().catch((error) => {
      search.expansions = null;
      throw error;
    });
  }
  return search.expansions;
}

async function fetchExpansions() {
  const select = document.getElementById("expansion");
  const chosen = select.value;
  const expansions = [];
  let cursor = null;
  do {
    const query = new URLSearchParams({ limit: "200" });
    if (cursor) query.set("cursor", cursor);
    const page = await api(`/v1/expansions?${query}`);
    expansions.push(...page.items);
    cursor = page.next_cursor;
  } while (cursor);
  expansions.sort((a, b) => a.name.localeCompare(b.name));
  for (const expansion of expansions) {
    select.append(el("option", { value: expansion.id, text: `${expansion.name} (${expansion.id})` }));
  }
  // What the user picked while the list loaded, else what the address asks for.
  select.value = chosen || (search.params && search.params.get("expansion_id")) || "";
}

async function showSearch(query) {
  const seen = navigation;
  document.title = "Search · cardcat console";
  fillForm(query); // once, before waiting: what the user types meanwhile is theirs
  search.params = query;
  try {
    await loadExpansions();
  } catch (error) {
    if (!stale(seen)) reportFailure(error);
    return;
  }
  if (stale(seen)) return;
  search.cursor = null;
  search.shown = 0;
  document.getElementById("results").replaceChildren();
  document.getElementById("result-count").textContent = "";
  document.getElementById("more").hidden = true;
  if (!currentKey()) {
    showMessage("Enter your API key at the top of the page to search the catalog.", "info");
    return;
  }
  await loadResults();
}

async function loadResults() {
  const seen = navigation;
  const query = new URLSearchParams(search.params);
  query.set("limit", String(PAGE_SIZE));
  if (search.cursor) query.set("cursor", search.cursor);
  const more = document.getElementById("more");
  more.disabled = true;
  let page;
  try {
    page = await api(`/v1/cards?${query}`);
  } catch (error) {
    if (stale(seen)) return;
    reportFailure(error);
    more.disabled = false;
    return;
  }
  if (stale(seen)) return;
  const grid = document.getElementById("results");
  for (const card of page.items) grid.append(resultTile(card));
  search.shown += page.items.length;
  search.cursor = page.next_cursor;
  more.hidden = !page.next_cursor;
  more.disabled = false;
  document.getElementById("result-count").textContent =
    search.shown === 0
      ? "No cards match."
      : `${search.shown} card${search.shown === 1 ? "" : "s"}${page.next_cursor ? " so far" : ""}`;
}

function resultTile(card) {
  const facts = [card.expansion_id, card.number ? `#${card.number}` : null, card.rarity].filter(Boolean);
  return el(
    "a",
    { class: "tile", href: `#/card/${encodeURIComponent(card.id)}`, "data-card-id": card.id },
    cardImage(card.image, "low", card.name),
    el("span", { class: "tile-name", text: card.name }),
    el("span", { class: "muted", text: facts.join(" · ") }),
    "score" in card ? el("span", { class: "score", text: `match ${(card.score * 100).toFixed(0)}%` }) : null,
  );
}

function setUpSearch() {
  const form = document.getElementById("search-form");
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const target = `#/search?${formQuery()}`;
    if (location.hash === target) route();
    else location.hash = target;
  });
  document.getElementById("q").addEventListener("input", syncSortState);
  document.getElementById("more").addEventListener("click", loadResults);
}

// ---- the card page --------------------------------------------------------------------------------

function printingName(variant) {
  const parts = [variant.type, variant.subtype, variant.size, variant.foil, ...(variant.stamps || [])];
  return parts.filter(Boolean).join(" · ");
}

async function showCard(cardId) {
  const seen = navigation;
  const root = document.getElementById("card");
  root.replaceChildren(el("p", { class: "muted", text: "Loading…" }));
  let card;
  try {
    card = await api(`/v1/cards/${encodeURIComponent(cardId)}`);
  } catch (error) {
    if (stale(seen)) return;
    root.replaceChildren();
    reportFailure(error);
    return;
  }
  if (stale(seen)) return;
  document.title = `${card.name} · cardcat console`;
  const expansionName = el("span", { text: card.expansion_id });
  const facts = el(
    "dl",
    { class: "facts" },
    fact("Expansion", expansionName),
    fact("Number", card.number),
    fact("Rarity", card.rarity),
    fact("Category", card.category),
    fact("Illustrator", card.illustrator),
    card.metadata && card.metadata.hp ? fact("HP", card.metadata.hp) : null,
    card.metadata && card.metadata.types ? fact("Types", card.metadata.types.join(", ")) : null,
    fact("Id", card.id),
  );
  const changes = el("div", { class: "changes" }, el("p", { class: "muted", text: "Loading price changes…" }));
  const printings =
    card.variants.length === 0
      ? [el("p", { class: "muted", text: "No printings are known for this card." })]
      : card.variants.map((variant) => printingSection(card, variant));
  root.replaceChildren(
    el("h1", { text: card.name }),
    el(
      "div",
      { class: "card-top" },
      el(
        "figure",
        { class: "face" },
        cardImage(card.image, "low", `${card.name} (thumbnail)`),
        el("figcaption", { text: "thumbnail" }),
      ),
      el(
        "figure",
        { class: "face large" },
        cardImage(card.image, "high", `${card.name} (full size)`),
        el("figcaption", { text: "full size" }),
      ),
      el("div", { class: "about" }, facts, el("h2", { text: "Price change" }), changes),
    ),
    el("h2", { text: "Printings" }),
    ...printings,
  );
  api(`/v1/expansions/${encodeURIComponent(card.expansion_id)}`)
    .then((expansion) => {
      expansionName.textContent = `${expansion.name} (${expansion.id})`;
    })
    .catch((error) => {
      if (!stale(seen)) reportFailure(error);
    });
  loadChanges(card, changes);
  for (const variant of card.variants) loadHistory(card, variant);
}

function fact(name, value) {
  if (value === null || value === undefined || value === "") return null;
  return [el("dt", { text: name }), el("dd", {}, value)];
}

function printingSection(card, variant) {
  const rows = variant.marketplace.map((price) =>
    el(
      "tr",
      {},
      el("td", { text: price.condition }),
      el("td", { class: "num", text: dollars(price.market) }),
      el("td", { class: "num", text: dollars(price.low) }),
      el("td", { class: "num", text: dollars(price.high) }),
      el("td", { class: "num", text: price.listing_count === null ? "–" : String(price.listing_count) }),
      el("td", { text: price.observed_on }),
    ),
  );
  const table =
    rows.length === 0
      ? el("p", { class: "muted", text: "No current prices for this printing." })
      : el(
          "table",
          { class: "prices" },
          el(
            "thead",
            {},
            el(
              "tr",
              {},
              ...["Condition", "Market", "Low", "High", "Listings", "Observed"].map((h) => el("th", { text: h })),
            ),
          ),
          el("tbody", {}, rows),
        );
  return el(
    "section",
    { class: "printing", "data-variant-id": String(variant.id) },
    el("h3", {}, printingName(variant) || "printing", el("span", { class: "muted", text: ` #${variant.id}` })),
    el(
      "div",
      { class: "printing-body" },
      table,
      el("div", { class: "chart", id: `chart-${variant.id}` }, el("p", { class: "muted", text: "Loading price history…" })),
    ),
  );
}

async function loadChanges(card, box) {
  // The full card read carries no change windows; the list does (`include=change`). The card's own
  // name inside its own expansion puts it on the first page.
  const query = new URLSearchParams({
    q: card.name,
    expansion_id: card.expansion_id,
    include: "change",
    limit: "200",
  });
  let row;
  try {
    const page = await api(`/v1/cards?${query}`);
    row = page.items.find((item) => item.id === card.id);
  } catch (error) {
    box.replaceChildren(el("p", { class: "error-text", text: describe(error) }));
    return;
  }
  if (!row || !row.change || row.change.length === 0) {
    box.replaceChildren(el("p", { class: "muted", text: "No price change computed for this card yet." }));
    return;
  }
  const order = { "1d": 0, "7d": 1, "30d": 2 };
  const entries = [...row.change].sort((a, b) => order[a.window] - order[b.window]);
  box.replaceChildren(
    el(
      "table",
      { class: "changes-table" },
      el("thead", {}, el("tr", {}, ...["Window", "Printing", "From", "To", "Change"].map((h) => el("th", { text: h })))),
      el(
        "tbody",
        {},
        entries.map((entry) =>
          el(
            "tr",
            {},
            el("td", { text: entry.window }),
            el("td", { text: `${entry.printing} #${entry.card_variant_id}` }),
            el("td", { class: "num", text: `${dollars(entry.start_cents)} (${entry.start_as_of})` }),
            el("td", { class: "num", text: `${dollars(entry.end_cents)} (${entry.observed_on})` }),
            el("td", {
              class: `num ${entry.change_cents > 0 ? "up" : entry.change_cents < 0 ? "down" : ""}`,
              text: `${entry.change_cents >= 0 ? "+" : "−"}${dollars(Math.abs(entry.change_cents))} (${(entry.change_bp / 100).toFixed(2)}%)`,
            }),
          ),
        ),
      ),
    ),
  );
}

async function loadHistory(card, variant) {
  const box = document.getElementById(`chart-${variant.id}`);
  let history;
  try {
    history = await api(
      `/v1/cards/${encodeURIComponent(card.id)}/prices?variant_id=${encodeURIComponent(variant.id)}`,
    );
  } catch (error) {
    // The card and this printing exist (they were just read), so a 404 here means this server keeps
    // no price history (the route is not there): say so and keep the page.
    const text = error instanceof ApiError && error.status === 404 ? "No price history." : describe(error);
    box.replaceChildren(el("p", { class: error.status === 404 ? "muted" : "error-text", text }));
    return;
  }
  // Every day keeps its place on the time axis; days without a value break the line (see runs()).
  const points = history.points || [];
  if (!points.some((point) => point.market !== null || point.low !== null)) {
    box.replaceChildren(el("p", { class: "muted", text: "No price history." }));
    return;
  }
  box.replaceChildren(priceChart(history, points));
}

/** A plain SVG chart: the market price as a line (broken where it is null) over the low–high band. */
function priceChart(history, points) {
  const width = 560;
  const height = 200;
  const pad = { left: 58, right: 12, top: 14, bottom: 28 };
  const values = points.flatMap((p) => [p.market, p.low, p.high]).filter((v) => v !== null && v !== undefined);
  let lo = Math.min(...values);
  let hi = Math.max(...values);
  if (lo === hi) {
    lo = Math.max(0, lo - 100);
    hi += 100;
  }
  const n = points.length;
  const x = (i) => pad.left + (n === 1 ? (width - pad.left - pad.right) / 2 : (i * (width - pad.left - pad.right)) / (n - 1));
  const y = (v) => pad.top + ((hi - v) * (height - pad.top - pad.bottom)) / (hi - lo);
  const chart = svg("svg", {
    viewBox: `0 0 ${width} ${height}`,
    class: "price-chart",
    role: "img",
    "aria-label": `${history.condition} market price from ${points[0].date} to ${points[n - 1].date}`,
  });
  // grid and axis labels
  for (const value of [hi, (hi + lo) / 2, lo]) {
    chart.append(svg("line", { x1: pad.left, x2: width - pad.right, y1: y(value), y2: y(value), class: "grid" }));
    chart.append(svg("text", { x: pad.left - 6, y: y(value) + 4, "text-anchor": "end", class: "axis" }, dollars(Math.round(value))));
  }
  chart.append(svg("text", { x: pad.left, y: height - 8, class: "axis" }, points[0].date));
  chart.append(svg("text", { x: width - pad.right, y: height - 8, "text-anchor": "end", class: "axis" }, points[n - 1].date));
  // low–high band, as one polygon per run of days that have both
  for (const run of runs(points, (p) => p.low !== null && p.high !== null)) {
    const top = run.map(([i, p]) => `${x(i)},${y(p.high)}`);
    const bottom = run.map(([i, p]) => `${x(i)},${y(p.low)}`).reverse();
    chart.append(svg("polygon", { points: [...top, ...bottom].join(" "), class: "band" }));
  }
  for (const run of runs(points, (p) => p.market !== null)) {
    chart.append(svg("polyline", { points: run.map(([i, p]) => `${x(i)},${y(p.market)}`).join(" "), class: "line" }));
  }
  const last = points[n - 1];
  const caption = el(
    "p",
    { class: "muted chart-caption" },
    `${history.condition} market, ${points[0].date} to ${last.date}: now ${dollars(last.market)} (range ${dollars(last.low)}–${dollars(last.high)})`,
  );
  return el("figure", { class: "chart-figure" }, chart, caption);
}

function runs(points, keep) {
  const out = [];
  let current = [];
  points.forEach((point, index) => {
    if (keep(point)) current.push([index, point]);
    else if (current.length) {
      out.push(current);
      current = [];
    }
  });
  if (current.length) out.push(current);
  return out;
}

// ---- scanning -------------------------------------------------------------------------------------

const REASONS = {
  print_unreadable:
    "No card recognised: its print (name, collector number and set code) could not be read, and nothing in the catalog looked close enough. Try a sharper photo in even light, with the card flat and filling most of the frame.",
  no_confident_match:
    "No card recognised: some of the print was read, but no card it points to matches the artwork well enough. The card may not be in the scanner's index, or glare or blur hid too much of it.",
};

function setUpScan() {
  const input = document.getElementById("photo");
  const preview = document.getElementById("preview");
  const button = document.getElementById("scan-button");
  input.addEventListener("change", () => {
    const file = input.files[0];
    button.disabled = !file;
    if (preview.src) URL.revokeObjectURL(preview.src);
    if (file) {
      preview.src = URL.createObjectURL(file);
      preview.hidden = false;
    } else {
      preview.hidden = true;
    }
    document.getElementById("scan-result").replaceChildren();
  });
  document.getElementById("scan-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const file = input.files[0];
    if (!file) return;
    clearMessage();
    const result = document.getElementById("scan-result");
    result.replaceChildren(el("p", { class: "muted", text: "Scanning…" }));
    button.disabled = true;
    const body = new FormData();
    body.append("image", file, file.name || "photo.jpg");
    const many = document.getElementById("scan-many").checked;
    try {
      if (many) {
        const data = await api("/v1/scan/page", { method: "POST", body });
        result.replaceChildren(pageAnswer(data, preview));
      } else {
        const data = await api("/v1/scan", { method: "POST", body });
        result.replaceChildren(scanAnswer(data));
      }
    } catch (error) {
      result.replaceChildren();
      reportFailure(error);
    } finally {
      button.disabled = false;
    }
  });
}

function scanAnswer(data) {
  if (data.matches.length === 0) {
    const reason = data.unidentified ? data.unidentified.reason : "unknown";
    const words = REASONS[reason] || `No card recognised (${reason}).`;
    return el(
      "div",
      { class: "unidentified", "data-reason": reason },
      el("h2", { text: "No card recognised" }),
      el("p", { text: words }),
      data.unidentified && data.unidentified.message ? el("p", { class: "muted", text: `The scanner said: “${data.unidentified.message}”` }) : null,
    );
  }
  const heading =
    data.matches.length === 1
      ? "Match"
      : `A close race: ${data.matches.length} candidates, best first (usually reprints that share the artwork)`;
  return el(
    "div",
    { class: "matches" },
    el("h2", { text: heading }),
    el("p", {}, tierBadge(data.analysis.tier), " ", TIERS[data.analysis.tier] || ""),
    el(
      "div",
      { class: "match-list" },
      data.matches.map((match) =>
        el(
          "a",
          { class: "match", href: `#/card/${encodeURIComponent(match.card.id)}`, "data-card-id": match.card.id },
          cardImage(match.card.image, "low", match.card.name),
          el(
            "div",
            { class: "match-text" },
            el("strong", { class: "match-name", text: match.card.name }),
            el("span", { text: `${match.card.expansion.name} (${match.card.expansion.id})` }),
            el("span", { text: `Number ${match.card.number}${match.card.rarity ? ` · ${match.card.rarity}` : ""}` }),
            el("span", { class: "score", text: `score ${match.score.toFixed(3)}` }),
          ),
        ),
      ),
    ),
  );
}

// A page of many cards (/v1/scan/page): the photo with each card's outline and number drawn on it, and
// each number's answer beside it.
const PLACES = {
  card_back: "A card lying face down.",
  empty_slot: "An empty pocket: no card found here.",
};

function pageAnswer(data, preview) {
  const width = preview.naturalWidth || 1;
  const height = preview.naturalHeight || 1;
  const drawing = svg("svg", { class: "page-outlines", viewBox: `0 0 ${width} ${height}`, role: "img" });
  drawing.setAttribute("aria-label", `the photo with ${data.cards.length} numbered outlines`);
  drawing.append(svg("image", { href: preview.src, x: "0", y: "0", width: String(width), height: String(height) }));
  const stroke = Math.max(2, Math.round(Math.max(width, height) / 300));
  data.cards.forEach((card, i) => {
    const points = card.corners.map(([x, y]) => `${x},${y}`).join(" ");
    const kind = card.matches.length ? "found" : card.unidentified ? card.unidentified.reason : "none";
    drawing.append(svg("polygon", { points, class: `outline outline-${kind}`, "stroke-width": String(stroke), "data-number": String(i + 1) }));
    const [cx, cy] = card.corners.reduce(([sx, sy], [x, y]) => [sx + x / 4, sy + y / 4], [0, 0]);
    drawing.append(svg("text", { x: String(cx), y: String(cy), class: "outline-number", "font-size": String(stroke * 14) }, String(i + 1)));
  });
  const heading =
    `${data.cards.filter((c) => c.matches.length).length} of ${data.cards.length} places named` +
    (data.layout === "grid" ? ` on a page of ${data.grid.rows} × ${data.grid.cols} pockets` : "") +
    (data.truncated ? " (more cards than 24: the largest are shown)" : "");
  const items = data.cards.map((card, i) =>
    el(
      "li",
      { class: "page-card", "data-number": String(i + 1), "data-card-id": card.matches.length === 1 ? card.matches[0].card.id : null },
      el("strong", { text: `${i + 1}${card.slot ? ` (row ${card.slot.row}, pocket ${card.slot.col})` : ""}: ` }),
      card.matches.length
        ? card.matches.map((match, k) =>
            el("a", { href: `#/card/${encodeURIComponent(match.card.id)}`, text: `${k ? " or " : ""}${match.card.name} (${match.card.id})` }),
          )
        : el("span", { class: "muted", text: PLACES[card.unidentified.reason] || REASONS[card.unidentified.reason] || card.unidentified.message }),
      card.matches.length ? el("span", {}, " ", tierBadge(card.analysis.tier)) : null,
    ),
  );
  return el("div", { class: "page" }, el("h2", { text: heading }), drawing, el("ol", { class: "page-cards" }, items));
}

const TIERS = {
  certain: "Backed by its printed number or a picture the scanner is sure of: straight to inventory.",
  likely: "One card, on less evidence: right nearly always; spot-check it.",
  review: "The scanner cannot tell which card this is: for a person to decide.",
};

function tierBadge(tier) {
  return el("span", { class: `tier tier-${tier}`, "data-tier": tier, text: tier });
}

// ---- batches: many photos in one job (/v1/scan/batches) --------------------------------------------

const UPLOAD_PER_REQUEST = 100; // the route's limit of photos a request

function setUpBatches() {
  const input = document.getElementById("batch-photos");
  const drop = document.getElementById("batch-drop");
  const start = document.getElementById("batch-start");
  const chosen = () => {
    const count = input.files.length;
    start.disabled = count === 0;
    document.getElementById("batch-chosen").textContent = count ? `${count} photo${count === 1 ? "" : "s"} chosen` : "";
  };
  input.addEventListener("change", chosen);
  drop.addEventListener("dragover", (event) => {
    event.preventDefault();
    drop.classList.add("over");
  });
  drop.addEventListener("dragleave", () => drop.classList.remove("over"));
  drop.addEventListener("drop", (event) => {
    event.preventDefault();
    drop.classList.remove("over");
    input.files = event.dataTransfer.files;
    chosen();
  });
  document.getElementById("batch-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const files = Array.from(input.files);
    if (!files.length) return;
    clearMessage();
    start.disabled = true;
    try {
      const batch = await api("/v1/scan/batches", { method: "POST" });
      for (let first = 0; first < files.length; first += UPLOAD_PER_REQUEST) {
        showMessage(`Uploading photos ${first + 1}–${Math.min(files.length, first + UPLOAD_PER_REQUEST)} of ${files.length}…`, "info");
        const body = new FormData();
        for (const file of files.slice(first, first + UPLOAD_PER_REQUEST)) body.append("image", file, file.name || "photo.jpg");
        await api(`/v1/scan/batches/${encodeURIComponent(batch.id)}/photos`, { method: "POST", body });
      }
      await api(`/v1/scan/batches/${encodeURIComponent(batch.id)}/close`, { method: "POST" });
      clearMessage();
      input.value = "";
      chosen();
      location.hash = `#/batches/${encodeURIComponent(batch.id)}`;
    } catch (error) {
      reportFailure(error);
      start.disabled = false;
    }
  });
  document.getElementById("batch-csv").addEventListener("click", () => downloadExport(shownBatch));
  document.getElementById("batch-cancel").addEventListener("click", async () => {
    try {
      await api(`/v1/scan/batches/${encodeURIComponent(shownBatch)}`, { method: "DELETE" });
      route();
    } catch (error) {
      reportFailure(error);
    }
  });
}

let shownBatch = "";

/** A batch's progress and answers, polled once a second until it is finished; the answers arrive in
 * the order they were given, each once (the results route's cursor), and are appended as they come. */
async function showBatch(batchId) {
  const box = document.getElementById("batch");
  shownBatch = batchId;
  box.hidden = !batchId;
  if (!batchId) return;
  const seen = navigation;
  const rows = document.querySelector("#batch-results tbody");
  rows.replaceChildren();
  // `complete`: the results route said there is nothing after the last page (a finished batch); the
  // status read before it may still say running, so the loop reads the status once more, not the page.
  let cursor = null;
  let complete = false;
  for (;;) {
    let batch;
    try {
      batch = await api(`/v1/scan/batches/${encodeURIComponent(batchId)}`);
      while (!complete) {
        const query = new URLSearchParams({ limit: "200" });
        if (cursor) query.set("cursor", cursor);
        const page = await api(`/v1/scan/batches/${encodeURIComponent(batchId)}/results?${query}`);
        if (stale(seen)) return;
        rows.append(...page.items.map(batchRow));
        complete = page.next_cursor === null;
        cursor = page.next_cursor;
        if (page.items.length === 0) break;
      }
    } catch (error) {
      if (!stale(seen)) reportFailure(error);
      return;
    }
    if (stale(seen)) return;
    drawBatch(batch);
    if (["done", "cancelled", "expired"].includes(batch.status)) return;
    await new Promise((resolve) => setTimeout(resolve, 1000));
    if (stale(seen)) return;
  }
}

function drawBatch(batch) {
  const { total, answered, waiting } = batch.photos;
  const tiers = batch.tiers;
  document.getElementById("batch-title").textContent = `Batch ${batch.id}: ${batch.status}`;
  const progress = document.getElementById("batch-progress");
  progress.value = batch.progress;
  progress.dataset.status = batch.status;
  document.getElementById("batch-summary").textContent =
    `${answered} of ${total} photos answered, ${waiting} waiting · ${tiers.certain} certain, ${tiers.likely} likely, ` +
    `${tiers.review} to review · ${batch.outcomes.error} could not be scanned`;
  document.getElementById("batch-cancel").hidden = ["done", "cancelled", "expired"].includes(batch.status);
}

function batchRow(result) {
  const name = result.name || result.url || "";
  const tier = result.analysis.tier;
  const cells = [el("td", { class: "num", text: String(result.index + 1) }), el("td", { text: name }), el("td", {}, tierBadge(tier))];
  if (result.error) {
    cells.push(el("td", { colspan: "4", class: "error-text", text: describe(new ApiError(0, result.error.code, result.error.message, null)) }));
  } else if (result.matches.length === 0) {
    const reason = result.unidentified ? result.unidentified.reason : "unknown";
    cells.push(el("td", { colspan: "4", class: "muted", text: `No card recognised (${reason.replace(/_/g, " ")})` }));
  } else {
    const best = result.matches[0];
    const others = result.matches.length > 1 ? ` (or ${result.matches.length - 1} more)` : "";
    cells.push(
      el("td", {}, el("a", { href: `#/card/${encodeURIComponent(best.card.id)}` }, best.card.name), others),
      el("td", { text: best.card.expansion.name }),
      el("td", { text: best.card.number || "" }),
      el("td", { class: "num", text: best.score.toFixed(3) }),
    );
  }
  return el("tr", { "data-index": String(result.index), "data-tier": tier }, cells);
}

/** The batch's CSV, fetched with the key (a plain link cannot send it) and handed to the browser. */
async function downloadExport(batchId) {
  const key = currentKey();
  try {
    const response = await fetch(`/v1/scan/batches/${encodeURIComponent(batchId)}/export?format=csv&layout=cardcat`, {
      headers: { Authorization: `Bearer ${key}` },
      cache: "no-store",
    });
    if (!response.ok) throw refusal(response, await response.json().catch(() => null));
    const url = URL.createObjectURL(await response.blob());
    const link = el("a", { href: url, download: `cardcat-batch-${batchId}.csv` });
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10_000);
  } catch (error) {
    reportFailure(error instanceof ApiError ? error : new ApiError(0, "network", `The export could not be fetched (${error.message}).`, null));
  }
}

// ---- start ----------------------------------------------------------------------------------------

document.addEventListener("DOMContentLoaded", () => {
  setUpKeyForm();
  setUpSearch();
  setUpScan();
  setUpBatches();
  window.addEventListener("hashchange", route);
  route();
});
