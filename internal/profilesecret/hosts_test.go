package profilesecret

import (
	"strings"
	"testing"
)

func TestHostsAllowOnlyTheServersListed(t *testing.T) {
	h, err := ParseHosts([]string{"smtp.example.com:587", "Relay.Example.com", "10.0.0.25", "[2001:db8::25]:25"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		host    string
		port    int
		allowed bool
	}{
		{"the server on its port", "smtp.example.com", 587, true},
		{"the server on another port", "smtp.example.com", 25, false},
		{"a host listed without a port, on any port", "relay.example.com", 465, true},
		{"a host in capitals, with a final dot", "RELAY.example.com.", 25, true},
		{"a subdomain of a host listed", "evil.relay.example.com", 25, false},
		{"a host that ends like one listed", "evilsmtp.example.com", 587, false},
		{"an IP listed", "10.0.0.25", 25, true},
		{"an IPv6 address on its port", "2001:db8::25", 25, true},
		{"another IP", "10.0.0.26", 25, false},
	} {
		if got := h.Allows(tc.host, tc.port); got != tc.allowed {
			t.Errorf("%s: Allows(%s, %d) = %v, want %v", tc.name, tc.host, tc.port, got, tc.allowed)
		}
	}
	if (Hosts{}).Allows("smtp.example.com", 587) || (Hosts{}).String() != "none" {
		t.Error("no servers listed allows one")
	}
}

func TestParseHostsRefusesWhatIsNotAServer(t *testing.T) {
	for _, bad := range []string{"", "smtp://mail.example.com", "user@mail.example.com", "*.example.com", "mail.example.com:0", "mail.example.com:smtp", "mail.example.com/x"} {
		if _, err := ParseHosts([]string{bad}); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("ParseHosts(%q): got %v, want an error", bad, err)
		}
	}
}
