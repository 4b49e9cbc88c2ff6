package controller

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"strings"

	"github.com/hashicorp/go-hclog"
)

// slogHCLog adapts slog to the hclog.Logger raft wants, so raft's logs go
// where the rest of ringlog's go.
type slogHCLog struct {
	l    *slog.Logger
	name string
	args []any
}

func newHCLog(l *slog.Logger) hclog.Logger { return &slogHCLog{l: l, name: "raft"} }

func toSlog(level hclog.Level) slog.Level {
	switch level {
	case hclog.Trace, hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	default:
		return slog.LevelInfo
	}
}

func (h *slogHCLog) Log(level hclog.Level, msg string, args ...any) {
	all := append([]any{"component", h.name}, h.args...)
	for _, a := range args {
		// hclog.Fmt values are a format and its arguments, which hclog
		// renders itself (raft logs its server list that way).
		if f, ok := a.(hclog.Format); ok && len(f) > 0 {
			if format, ok := f[0].(string); ok {
				a = fmt.Sprintf(format, f[1:]...)
			}
		}
		all = append(all, a)
	}
	h.l.Log(context.Background(), toSlog(level), msg, all...)
}
func (h *slogHCLog) Trace(msg string, args ...any) { h.Log(hclog.Trace, msg, args...) }
func (h *slogHCLog) Debug(msg string, args ...any) { h.Log(hclog.Debug, msg, args...) }
func (h *slogHCLog) Info(msg string, args ...any)  { h.Log(hclog.Info, msg, args...) }
func (h *slogHCLog) Warn(msg string, args ...any)  { h.Log(hclog.Warn, msg, args...) }
func (h *slogHCLog) Error(msg string, args ...any) { h.Log(hclog.Error, msg, args...) }
func (h *slogHCLog) enabled(l slog.Level) bool {
	return h.l.Enabled(context.Background(), l)
}
func (h *slogHCLog) IsTrace() bool        { return h.enabled(slog.LevelDebug) }
func (h *slogHCLog) IsDebug() bool        { return h.enabled(slog.LevelDebug) }
func (h *slogHCLog) IsInfo() bool         { return h.enabled(slog.LevelInfo) }
func (h *slogHCLog) IsWarn() bool         { return h.enabled(slog.LevelWarn) }
func (h *slogHCLog) IsError() bool        { return h.enabled(slog.LevelError) }
func (h *slogHCLog) ImpliedArgs() []any   { return h.args }
func (h *slogHCLog) Name() string         { return h.name }
func (h *slogHCLog) SetLevel(hclog.Level) {} // the slog handler decides
func (h *slogHCLog) GetLevel() hclog.Level {
	if h.IsDebug() {
		return hclog.Debug
	}
	return hclog.Info
}
func (h *slogHCLog) With(args ...any) hclog.Logger {
	return &slogHCLog{l: h.l, name: h.name, args: append(append([]any{}, h.args...), args...)}
}
func (h *slogHCLog) Named(name string) hclog.Logger {
	return &slogHCLog{l: h.l, name: h.name + "." + name, args: h.args}
}
func (h *slogHCLog) ResetNamed(name string) hclog.Logger {
	return &slogHCLog{l: h.l, name: name, args: h.args}
}
func (h *slogHCLog) StandardLogger(*hclog.StandardLoggerOptions) *log.Logger {
	return log.New(h.StandardWriter(nil), "", 0)
}
func (h *slogHCLog) StandardWriter(*hclog.StandardLoggerOptions) io.Writer { return hclogWriter{h} }

type hclogWriter struct{ h *slogHCLog }

func (w hclogWriter) Write(p []byte) (int, error) {
	w.h.Info(strings.TrimSpace(string(p)))
	return len(p), nil
}
