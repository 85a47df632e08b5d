package openstack

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strings"
)

// KeyCloudConfig is the key of a cloud-config Secret.
const KeyCloudConfig = "cloudprovider.conf"

// CloudConfig is the OpenStack account of a Kubernikus cluster, as its
// cloudprovider.conf holds it (the cloud-config Secret of the cluster's
// kube-system namespace):
//
//	[Global]
//	auth-url="https://identity.example.com/v3"
//	domain-name="kubernikus"
//	tenant-id="..."
//	username="..."
//	password="..."
//	region="eu-de-1"
type CloudConfig struct {
	AuthURL    string
	DomainName string
	TenantID   string
	Username   string
	Password   string
	Region     string
}

// ParseCloudConfig reads the [Global] section of a cloudprovider.conf;
// other sections are skipped. An error names the line or the missing key,
// never a value.
func ParseCloudConfig(raw []byte) (CloudConfig, error) {
	var c CloudConfig
	keys := map[string]*string{
		"auth-url": &c.AuthURL, "domain-name": &c.DomainName, "tenant-id": &c.TenantID,
		"username": &c.Username, "password": &c.Password, "region": &c.Region,
	}
	section := ""
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
			continue
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = strings.ToLower(strings.TrimSpace(line[1 : len(line)-1]))
			continue
		case section != "global":
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return CloudConfig{}, fmt.Errorf("line %d: want key=value", n)
		}
		k, v = strings.ToLower(strings.TrimSpace(k)), strings.TrimSpace(v)
		if len(v) >= 2 && (v[0] == '"' && v[len(v)-1] == '"' || v[0] == '\'' && v[len(v)-1] == '\'') {
			v = v[1 : len(v)-1]
		}
		if p, known := keys[k]; known {
			*p = v
		}
	}
	var errs []error
	for _, k := range []string{"auth-url", "username", "password", "tenant-id", "region"} {
		if *keys[k] == "" {
			errs = append(errs, fmt.Errorf("[Global] %s: required", k))
		}
	}
	return c, errors.Join(errs...)
}

// LoadCloudConfig reads a cloudprovider.conf file.
func LoadCloudConfig(path string) (CloudConfig, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return CloudConfig{}, fmt.Errorf("reading the OpenStack account: %w", err)
	}
	cc, err := ParseCloudConfig(raw)
	if err != nil {
		return CloudConfig{}, fmt.Errorf("the OpenStack account %s: %w", path, err)
	}
	return cc, nil
}
