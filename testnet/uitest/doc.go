// Package uitest checks the dashboard (node/dashboard) in a real browser:
// a live three-peer mesh runs in process — node.Routers over infer/sim
// engines, gossiping digests and loads over an in-memory bus and
// forwarding requests to each other's ServeForwarded, each behind its own
// httpapi.Server — and headless Chromium, driven over the DevTools protocol
// by github.com/chromedp/chromedp, loads one peer's page and checks that
// the peers and the routing decisions appear, then saves a screenshot.
//
// The test needs a Chromium on PATH (scripts/install-chromium.sh installs
// Debian's package) and skips with that advice when there is none, so the
// rest of the tree's tests never need a browser.
package uitest
