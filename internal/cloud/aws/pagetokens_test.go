package aws

import (
	"strings"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
)

// TestPageTokensEndAListingThatGoesRoundInCircles: every EC2 listing
// (instances, subnets, security groups, scheduled events) refuses a page
// token it was given before, so that an answer whose pages go round in
// circles ends the listing with an error instead of listing for ever.
func TestPageTokensEndAListingThatGoesRoundInCircles(t *testing.T) {
	seen := pageTokens{}
	for _, token := range []*string{awssdk.String("a"), nil, awssdk.String(""), awssdk.String("b")} {
		if err := seen.next(token); err != nil {
			t.Fatalf("token %q refused the first time: %v", awssdk.ToString(token), err)
		}
	}
	err := seen.next(awssdk.String("a"))
	if err == nil || !strings.Contains(err.Error(), `"a" twice`) {
		t.Fatalf("token a given again: %v, want an error naming it", err)
	}
}
