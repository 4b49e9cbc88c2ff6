package netpath

import "strings"

// isInternalTopic reports names reserved for the broker's own topics.
func isInternalTopic(name string) bool {
	return strings.HasPrefix(name, "__")
}
