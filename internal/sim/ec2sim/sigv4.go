package ec2sim

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// verifySignature checks a request's Signature Version 4 Authorization
// header against the secret key of the access key it names, the way EC2
// does: it rebuilds the canonical request from the headers the client
// signed and compares signatures. It returns the access key ID and the
// region the request was signed for.
func verifySignature(r *http.Request, body []byte, secrets map[string]string) (accessKeyID, region string, fault *Fault) {
	const scheme = "AWS4-HMAC-SHA256 "
	auth := r.Header.Get("Authorization")
	if !strings.HasPrefix(auth, scheme) {
		return "", "", &Fault{Code: "AuthFailure", Message: "AWS was not able to validate the provided access credentials", Status: http.StatusUnauthorized}
	}
	fields := map[string]string{}
	for _, part := range strings.Split(strings.TrimPrefix(auth, scheme), ",") {
		if k, v, ok := strings.Cut(strings.TrimSpace(part), "="); ok {
			fields[k] = v
		}
	}
	scope := strings.Split(fields["Credential"], "/")
	if len(scope) != 5 || scope[3] != "ec2" || scope[4] != "aws4_request" {
		return "", "", &Fault{Code: "IncompleteSignature", Message: fmt.Sprintf("Credential %q is not a valid scope", fields["Credential"]), Status: http.StatusBadRequest}
	}
	accessKeyID, date, region := scope[0], scope[1], scope[2]
	secret, ok := secrets[accessKeyID]
	if !ok {
		return accessKeyID, region, &Fault{Code: "AuthFailure", Message: "AWS was not able to validate the provided access credentials", Status: http.StatusUnauthorized}
	}
	signedHeaders := strings.Split(fields["SignedHeaders"], ";")
	var canonical strings.Builder
	canonical.WriteString(r.Method + "\n" + canonicalPath(r) + "\n" + canonicalQuery(r) + "\n")
	for _, h := range signedHeaders {
		canonical.WriteString(h + ":" + headerValue(r, h) + "\n")
	}
	payload := r.Header.Get("X-Amz-Content-Sha256")
	if payload == "" {
		sum := sha256.Sum256(body)
		payload = hex.EncodeToString(sum[:])
	}
	canonical.WriteString("\n" + fields["SignedHeaders"] + "\n" + payload)
	hash := sha256.Sum256([]byte(canonical.String()))
	toSign := "AWS4-HMAC-SHA256\n" + r.Header.Get("X-Amz-Date") + "\n" + strings.Join(scope[1:], "/") + "\n" + hex.EncodeToString(hash[:])
	key := []byte("AWS4" + secret)
	for _, part := range []string{date, region, "ec2", "aws4_request"} {
		key = hmacSHA256(key, part)
	}
	want := hex.EncodeToString(hmacSHA256(key, toSign))
	if !hmac.Equal([]byte(want), []byte(fields["Signature"])) {
		return accessKeyID, region, &Fault{Code: "SignatureDoesNotMatch", Message: "The request signature we calculated does not match the signature you provided.", Status: http.StatusForbidden}
	}
	return accessKeyID, region, nil
}

func hmacSHA256(key []byte, data string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(data))
	return h.Sum(nil)
}

func canonicalPath(r *http.Request) string {
	if p := r.URL.EscapedPath(); p != "" {
		return p
	}
	return "/"
}

func canonicalQuery(r *http.Request) string {
	q := r.URL.Query()
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		vs := q[k]
		sort.Strings(vs)
		for _, v := range vs {
			parts = append(parts, k+"="+v)
		}
	}
	return strings.Join(parts, "&")
}

// headerValue is a header's canonical value: Go's server moves Host and
// Content-Length out of the header map, so they are read back from the
// request.
func headerValue(r *http.Request, name string) string {
	switch name {
	case "host":
		return r.Host
	case "content-length":
		if v := r.Header.Get("Content-Length"); v != "" {
			return v
		}
		return strconv.FormatInt(r.ContentLength, 10)
	}
	values := slices.Clone(r.Header.Values(name))
	for i, v := range values {
		values[i] = strings.Join(strings.Fields(v), " ")
	}
	return strings.Join(values, ",")
}
