package peer

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

var saslFormatter = kmsg.NewRequestFormatter(kmsg.FormatterClientID("ringlog-broker"))

// maxSASLResponse bounds a SASL handshake or authenticate response.
const maxSASLResponse = 1 << 20

// authenticate runs SASLHandshake and the SCRAM-SHA-512 exchange as the
// inter-broker user on a new connection, by deadline.
func (c *Client) authenticate(ctx context.Context, cn *conn, deadline time.Time) error {
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	send := func(req kmsg.Request, resp kmsg.Response) error {
		body, err := cn.roundTrip(ctx, saslFormatter, req, maxSASLResponse, nil)
		if err != nil {
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
	mech := scram.Auth{User: c.cfg.User, Pass: c.cfg.Password}.AsSha512Mechanism()
	sess, msg, err := mech.Authenticate(ctx, cn.addr)
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
