"""The web console at `/console`: a static page (HTML, JS, CSS shipped in the package) that talks to `/v1`
from the browser with a key the user types in; the server stores no key and renders nothing."""
