// Package openstack is pitstop's one OpenStack client: accounts read from
// a cloudprovider.conf (cloudconfig.go), each logged in to Keystone once
// and again when its token expires, and what pitstop asks of them
// (openstack.go): a Nova server by ID and its deletion, and the node
// pools of a Kubernikus cluster. The Kubernikus integration and the
// kubernikusCount check share one set of accounts.
package openstack
