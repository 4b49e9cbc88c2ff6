package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
)

// `ringlog dev certs` writes a throwaway CA, a server certificate and a
// client certificate for trying the TLS listener (and for the tests). They
// are for development only: keys are written unencrypted.

func devCommand() *cli.Command {
	return &cli.Command{
		Name:  "dev",
		Usage: "development helpers",
		Subcommands: []*cli.Command{devClusterCommand(), devJoinCommand(), devS3Command(), {
			Name:  "certs",
			Usage: "write ca.pem, server.pem/server-key.pem and client.pem/client-key.pem for TLS and mutual TLS",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "out", Required: true, Usage: "directory to write the PEM files to"},
				&cli.StringFlag{Name: "hosts", Value: "127.0.0.1,::1,localhost", Usage: "comma-separated IPs and DNS names for the server certificate"},
				&cli.DurationFlag{Name: "valid", Value: 365 * 24 * time.Hour, Usage: "validity of every certificate"},
			},
			Action: func(c *cli.Context) error {
				files, err := writeDevCerts(c.String("out"), strings.Split(c.String("hosts"), ","), c.Duration("valid"))
				if err != nil {
					return err
				}
				for _, f := range files {
					fmt.Println(f)
				}
				return nil
			},
		}},
	}
}

// devIdentity is a certificate with its key.
type devIdentity struct {
	cert *x509.Certificate
	der  []byte
	key  *ecdsa.PrivateKey
}

// writeDevCerts creates the CA and the two leaf certificates in dir and
// returns the paths written.
func writeDevCerts(dir string, hosts []string, valid time.Duration) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	now := time.Now().Add(-time.Minute) // tolerate small clock skew
	ca, err := newDevCert(&x509.Certificate{
		Subject:               pkix.Name{CommonName: "ringlog dev CA"},
		NotBefore:             now,
		NotAfter:              now.Add(valid),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}, nil)
	if err != nil {
		return nil, err
	}
	srvTmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "ringlog broker"},
		NotBefore:   now,
		NotAfter:    now.Add(valid),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		h = strings.TrimSpace(h)
		if h == "" {
			continue
		}
		if ip := net.ParseIP(h); ip != nil {
			srvTmpl.IPAddresses = append(srvTmpl.IPAddresses, ip)
		} else {
			srvTmpl.DNSNames = append(srvTmpl.DNSNames, h)
		}
	}
	srv, err := newDevCert(srvTmpl, ca)
	if err != nil {
		return nil, err
	}
	cli, err := newDevCert(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "ringlog dev client"},
		NotBefore:   now,
		NotAfter:    now.Add(valid),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, ca)
	if err != nil {
		return nil, err
	}
	var written []string
	for _, f := range []struct {
		name string
		id   *devIdentity
		key  bool
	}{
		{"ca.pem", ca, false}, {"ca-key.pem", ca, true},
		{"server.pem", srv, false}, {"server-key.pem", srv, true},
		{"client.pem", cli, false}, {"client-key.pem", cli, true},
	} {
		var block *pem.Block
		mode := os.FileMode(0o644)
		if f.key {
			der, err := x509.MarshalPKCS8PrivateKey(f.id.key)
			if err != nil {
				return nil, err
			}
			block, mode = &pem.Block{Type: "PRIVATE KEY", Bytes: der}, 0o600
		} else {
			block = &pem.Block{Type: "CERTIFICATE", Bytes: f.id.der}
		}
		path := filepath.Join(dir, f.name)
		if err := os.WriteFile(path, pem.EncodeToMemory(block), mode); err != nil {
			return nil, err
		}
		written = append(written, path)
	}
	return written, nil
}

// newDevCert signs tmpl with parent, or self-signs when parent is nil.
func newDevCert(tmpl *x509.Certificate, parent *devIdentity) (*devIdentity, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	tmpl.SerialNumber = serial
	signerCert, signerKey := tmpl, key
	if parent != nil {
		signerCert, signerKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signerCert, &key.PublicKey, signerKey)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &devIdentity{cert: cert, der: der, key: key}, nil
}
