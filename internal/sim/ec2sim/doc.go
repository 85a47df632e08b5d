// Package ec2sim is an in-memory EC2 for tests: an HTTP server that
// speaks EC2's query protocol (form-encoded POSTs naming an Action, signed
// with Signature Version 4) and answers with EC2's XML responses and
// errors, so that the real AWS SDK runs against it unchanged. It keeps
// instances, subnets, security groups and images in memory, records every
// request it receives (after checking its signature against the
// credentials it knows), paginates like EC2 does (filters apply within a
// page, so a page may be empty and still carry a nextToken), and injects
// faults such as throttling on demand. It serves the few actions pitstop's
// aws provider uses and must never be used outside tests.
package ec2sim
