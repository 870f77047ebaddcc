#!/usr/bin/env bash
# Retakes the console screenshots beside this script (search, card page, scan results): it runs the
# browser tests that visit those pages, which save them when CARDCAT_CONSOLE_SCREENSHOTS names a folder.
# Needs ../shared (the real feed: faces and the scanner), PostgreSQL and Chromium (bash .ci/setup);
# takes a few minutes, most of it starting the scanner on Ray Serve.
set -euo pipefail
cd "$(dirname "$0")/../.."
CARDCAT_CONSOLE_SCREENSHOTS=docs/img .venv/bin/python -m pytest -q -p no:cacheprovider \
  tests/console/test_console.py -k "(typo and postgresql) or TG03 or batch or page_of_cards"
ls -l docs/img/console-*.png
