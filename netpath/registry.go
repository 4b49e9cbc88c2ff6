package netpath

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// apiHandler is one Kafka API as the broker serves it. The same table feeds
// ApiVersions and the dispatcher, so the versions we advertise cannot drift
// from the versions we handle.
type apiHandler struct {
	key int16
	// min is what ApiVersions reports. A handler may still refuse
	// versions above it per request: librdkafka stops compressing when
	// Produce's advertised minimum is above 0, so Produce advertises 0 and
	// answers v0-v2 with UNSUPPORTED_VERSION.
	min    int16
	max    int16
	handle func(s *Server, r *request) reply
}

var handlers = map[int16]*apiHandler{}

func register(key, min, max int16, fn func(*Server, *request) reply) {
	if kmsg.RequestForKey(key) == nil || key < 0 || key > maxAPIKey {
		panic("netpath: register of unknown key")
	}
	if _, dup := handlers[key]; dup {
		panic("netpath: duplicate handler registration")
	}
	handlers[key] = &apiHandler{key: key, min: min, max: max, handle: fn}
}

// registeredKeys returns the handled API keys in ascending order.
func registeredKeys() []int16 {
	keys := make([]int16, 0, len(handlers))
	for k := range handlers {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	return keys
}
