package netpath

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ApiVersions: v0-3
//
// Behavior:
//   - Lists every registered handler's range (the table in registry.go).
//   - A version above 3 gets a v0 response with UNSUPPORTED_VERSION and our
//     ranges (KIP-511), so newer clients retry with a version we know.
//   - The response header never has tagged fields (see writeResponse).

const apiVersionsKey = 18

func init() { register(apiVersionsKey, 0, 3, handleAPIVersions) }

func handleAPIVersions(s *Server, r *request) reply {
	return immediate(apiVersionsResponse(r.hdr.version, 0))
}

func apiVersionsUnsupported() reply {
	return immediate(apiVersionsResponse(0, kerr.UnsupportedVersion.Code))
}

func apiVersionsResponse(version, code int16) *kmsg.ApiVersionsResponse {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = version
	resp.ErrorCode = code
	for _, key := range registeredKeys() {
		h := handlers[key]
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey = key
		k.MinVersion = h.min
		k.MaxVersion = h.max
		resp.ApiKeys = append(resp.ApiKeys, k)
	}
	return resp
}
