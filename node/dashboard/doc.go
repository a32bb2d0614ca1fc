// Package dashboard is a peer's live web page: the mesh as a picture, each
// peer's load and cache, a feed of routing decisions and charts over time,
// built from a node.Router's status and served under /ui/ (mount it on the
// API with httpapi.WithDashboard(d.Handler())).
//
// Concurrency: see Dashboard. There are no package-level variables holding
// state, so many dashboards can run in one process.
package dashboard
