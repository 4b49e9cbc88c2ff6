package netpath

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// dialBroker opens this broker's own connection to another broker's
// plaintext listener (replica fetches, transaction markers) and, when
// that listener requires SASL, authenticates as the inter-broker user
// with SCRAM-SHA-512 before returning.
func (s *Server) dialBroker(ctx context.Context, addr string) (net.Conn, *bufio.Reader, error) {
	d := net.Dialer{Timeout: 5 * time.Second}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	br := bufio.NewReaderSize(nc, 64<<10)
	sec := s.cfg.Security
	if !slices.Contains(sec.SASLListeners, "plaintext") || sec.InterBrokerUser == "" {
		return nc, br, nil
	}
	deadline := time.Now().Add(10 * time.Second)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	nc.SetDeadline(deadline)
	if err := s.authenticatePeer(ctx, nc, br, addr); err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("authenticating to broker %s as %s: %w", addr, sec.InterBrokerUser, err)
	}
	nc.SetDeadline(time.Time{})
	return nc, br, nil
}

func (s *Server) authenticatePeer(ctx context.Context, nc net.Conn, br *bufio.Reader, addr string) error {
	corr := int32(0)
	send := func(req kmsg.Request, resp kmsg.Response) error {
		corr++
		if _, err := nc.Write(peerFormatter.AppendRequest(nil, req, corr)); err != nil {
			return err
		}
		var hdr [8]byte
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			return err
		}
		size := int32(binary.BigEndian.Uint32(hdr[:]))
		if got := int32(binary.BigEndian.Uint32(hdr[4:])); got != corr {
			return fmt.Errorf("correlation id %d, want %d", got, corr)
		}
		if size < 4 || size > 1<<20 {
			return fmt.Errorf("response size %d", size)
		}
		body := make([]byte, size-4)
		if _, err := io.ReadFull(br, body); err != nil {
			return err
		}
		resp.SetVersion(req.GetVersion())
		return resp.ReadFrom(body)
	}
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "SCRAM-SHA-512"
	hsResp := kmsg.NewPtrSASLHandshakeResponse()
	if err := send(hs, hsResp); err != nil {
		return err
	}
	if err := kerr.ErrorForCode(hsResp.ErrorCode); err != nil {
		return err
	}
	mech := scram.Auth{User: s.cfg.Security.InterBrokerUser, Pass: s.cfg.Security.InterBrokerPassword}.AsSha512Mechanism()
	sess, msg, err := mech.Authenticate(ctx, addr)
	if err != nil {
		return err
	}
	for range 4 {
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.Version, req.SASLAuthBytes = 1, msg
		resp := kmsg.NewPtrSASLAuthenticateResponse()
		if err := send(req, resp); err != nil {
			return err
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return err
		}
		done, next, err := sess.Challenge(resp.SASLAuthBytes)
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		msg = next
	}
	return fmt.Errorf("SCRAM exchange did not finish")
}

var peerFormatter = kmsg.NewRequestFormatter(kmsg.FormatterClientID("ringlog-broker"))
