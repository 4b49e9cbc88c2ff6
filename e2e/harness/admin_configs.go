package harness

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
)

func SetConfig(k, v string) kadm.AlterConfig {
	return kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: &v}
}

// AlterErr returns the error of an alter call for one resource: the
// request's or the resource's.
func AlterErr(rs kadm.AlterConfigsResponses, err error) error {
	if err != nil {
		return fmt.Errorf("request failed: %w", err)
	}
	if len(rs) != 1 {
		return fmt.Errorf("%d responses, want 1", len(rs))
	}
	return rs[0].Err
}
