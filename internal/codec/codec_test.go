package codec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/klauspost/compress/snappy/xerial"
	"github.com/klauspost/compress/zstd"
)

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	src := bytes.Repeat([]byte("record batch records section "), 5000)
	for _, c := range []Codec{None, Gzip, Snappy, LZ4, Zstd} {
		t.Run(c.String(), func(t *testing.T) {
			// Concurrent use shares the pooled and global codec state.
			var wg sync.WaitGroup
			for g := range 4 {
				wg.Go(func() {
					in := append([]byte(fmt.Sprint(g)), src...)
					prefix := []byte("hdr")
					out, err := Compress(c, bytes.Clone(prefix), in)
					if err != nil || !bytes.HasPrefix(out, prefix) {
						t.Errorf("compress: %v", err)
						return
					}
					if c != None && len(out) >= len(in) {
						t.Errorf("%d bytes compressed to %d", len(in), len(out))
					}
					back, err := Decompress(c, []byte("x"), out[len(prefix):])
					if err != nil || !bytes.Equal(back[1:], in) || back[0] != 'x' {
						t.Errorf("decompress: %v (%d bytes, want %d)", err, len(back)-1, len(in))
					}
				})
			}
			wg.Wait()
		})
	}
}

func TestSnappyXerial(t *testing.T) {
	t.Parallel()
	src := bytes.Repeat([]byte("abcdefgh"), 20000) // several 32 KiB chunks
	framed := CompressXerial(nil, src)
	if !IsXerial(framed) {
		t.Fatal("CompressXerial output is not framed")
	}
	// What the Java client writes decodes the same way.
	for _, in := range [][]byte{framed, xerial.Encode(nil, src)} {
		out, err := Decompress(Snappy, nil, in)
		if err != nil || !bytes.Equal(out, src) {
			t.Fatalf("xerial: %v", err)
		}
	}
	bad := bytes.Clone(framed)
	binary.BigEndian.PutUint32(bad[16:], 1<<30) // chunk length past the end
	if _, err := Decompress(Snappy, nil, bad); err == nil {
		t.Fatal("accepted a chunk past the end")
	}
}

func TestDecompressLimits(t *testing.T) {
	t.Parallel()
	// A snappy block whose header claims 1 GiB.
	claim := binary.AppendUvarint(nil, 1<<30)
	if _, err := Decompress(Snappy, nil, append(claim, 0, 0, 0)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("snappy claiming 1 GiB: %v", err)
	}
	// Real data over the limit, for the streaming codecs and zstd: each
	// compresses and decompresses 128 MiB, so they run side by side
	// (Decompress's shared codec state is safe for concurrent use).
	big := make([]byte, MaxDecompressed+1)
	for _, c := range []Codec{Gzip, LZ4, Zstd} {
		t.Run(c.String(), func(t *testing.T) {
			t.Parallel()
			var z []byte
			if c == Zstd {
				enc, _ := zstd.NewWriter(nil)
				z = enc.EncodeAll(big, nil)
			} else {
				var err error
				if z, err = Compress(c, nil, big); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := Decompress(c, nil, z); !errors.Is(err, ErrTooLarge) {
				t.Fatalf("%v over the limit: %v", c, err)
			}
		})
	}
	if _, err := Decompress(Codec(5), nil, nil); !errors.Is(err, ErrUnknown) {
		t.Fatalf("codec 5: %v", err)
	}
	for _, c := range []Codec{Gzip, Snappy, LZ4, Zstd} {
		if _, err := Decompress(c, nil, []byte("definitely not compressed data")); err == nil {
			t.Fatalf("%v accepted garbage", c)
		}
	}
}
