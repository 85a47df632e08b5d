// Package fleet is pitstop's read model of the cluster's maintenance: the
// compiled profiles (Registry, the last valid generation of each), the
// cluster as checks see it (Cluster, read from the manager's cache once
// per evaluation), each node's decoded record (Records), the evaluation of
// a node in a profile (Evaluate, changing nothing), the engine's last
// decisions (Decisions), and what the dashboard and `pitstop explain` show
// (Evaluator: a node's evaluations, the fleet's Overview). The profile
// controller writes; everything here only reads.
package fleet
