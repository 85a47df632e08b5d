package main

// The container image is a single static binary with no /etc/ssl, so the TLS
// clients for AWS, Slack and mail would find no certificate roots there. The
// fallback bundle is used only when the system has no roots of its own, so on
// a host or base image with a CA store that store still wins.
import _ "golang.org/x/crypto/x509roots/fallback"
