package dashboard

// AccessPath is the non-resource URL a user must be allowed to get to
// read the dashboard off loopback (internal/access guards it): every page,
// script and API answer is authorized as `get` on it, whatever its own
// path. It is pitstop's own, so that a grant of another tool's
// "/dashboard" never reaches it, and a ClusterRole grants it with one
// rule:
//
//	rules:
//	  - nonResourceURLs: ["/pitstop/dashboard"]
//	    verbs: ["get"]
//
// The chart's ClusterRole pitstop-dashboard-viewer is that rule.
const AccessPath = "/pitstop/dashboard"
