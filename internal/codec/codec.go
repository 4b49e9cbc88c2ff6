// Package codec compresses and decompresses the records section of Kafka
// record batches (magic 2) with the codecs of attribute bits 0-2: gzip,
// snappy (raw blocks or xerial framing, as Java clients write it), lz4
// (the frame format) and zstd. It has no Kafka types so that the engine
// (log compaction, produce validation) and the client-side harness can
// share it.
//
// Decompression is bounded by MaxDecompressed: batches come from clients,
// and a few kilobytes of zstd or snappy can claim gigabytes.
package codec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/snappy/xerial"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Codec is a record batch compression codec (attributes & 0x07).
type Codec int8

const (
	None   Codec = 0
	Gzip   Codec = 1
	Snappy Codec = 2
	LZ4    Codec = 3
	Zstd   Codec = 4
)

func (c Codec) String() string {
	switch c {
	case None:
		return "none"
	case Gzip:
		return "gzip"
	case Snappy:
		return "snappy"
	case LZ4:
		return "lz4"
	case Zstd:
		return "zstd"
	}
	return fmt.Sprintf("codec(%d)", int8(c))
}

// MaxDecompressed bounds the decompressed size of one batch's records.
const MaxDecompressed = 128 << 20

var (
	// ErrTooLarge: the records decompress to more than MaxDecompressed.
	ErrTooLarge = errors.New("codec: decompressed records exceed the limit")
	// ErrUnknown: the codec is not one of the five.
	ErrUnknown = errors.New("codec: unknown compression codec")
)

// xerialHeader opens snappy data in the xerial framing (magic, then
// version and compatible version, then chunks of length + raw block).
var xerialHeader = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

const xerialPreamble = 16 // header + two int32 versions

// IsXerial reports whether snappy data uses the xerial framing.
func IsXerial(src []byte) bool {
	return len(src) >= len(xerialHeader) && bytes.Equal(src[:len(xerialHeader)], xerialHeader)
}

var (
	gzReaders sync.Pool // *gzip.Reader
	gzWriters sync.Pool // *gzip.Writer
	lzReaders sync.Pool // *lz4.Reader
	lzWriters sync.Pool // *lz4.Writer

	zstdOnce sync.Once
	zstdDec  *zstd.Decoder
	zstdEnc  *zstd.Encoder
	zstdErr  error
)

// zstdCodecs builds the shared zstd decoder and encoder; DecodeAll and
// EncodeAll are safe for concurrent use.
func zstdCodecs() (*zstd.Decoder, *zstd.Encoder, error) {
	zstdOnce.Do(func() {
		zstdDec, zstdErr = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(MaxDecompressed))
		if zstdErr != nil {
			return
		}
		zstdEnc, zstdErr = zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedFastest))
	})
	return zstdDec, zstdEnc, zstdErr
}

// Decompress appends the decompressed src to dst.
func Decompress(c Codec, dst, src []byte) ([]byte, error) {
	switch c {
	case None:
		return append(dst, src...), nil
	case Gzip:
		r, _ := gzReaders.Get().(*gzip.Reader)
		var err error
		if r == nil {
			r, err = gzip.NewReader(bytes.NewReader(src))
		} else {
			err = r.Reset(bytes.NewReader(src))
		}
		if err != nil {
			return dst, fmt.Errorf("codec: gzip: %w", err)
		}
		dst, err = readAllLimited(dst, r)
		gzReaders.Put(r)
		if err != nil {
			return dst, fmt.Errorf("codec: gzip: %w", err)
		}
		return dst, nil
	case Snappy:
		return decodeSnappy(dst, src)
	case LZ4:
		r, _ := lzReaders.Get().(*lz4.Reader)
		if r == nil {
			r = lz4.NewReader(bytes.NewReader(src))
		} else {
			r.Reset(bytes.NewReader(src))
		}
		dst, err := readAllLimited(dst, r)
		lzReaders.Put(r)
		if err != nil {
			return dst, fmt.Errorf("codec: lz4: %w", err)
		}
		return dst, nil
	case Zstd:
		dec, _, err := zstdCodecs()
		if err != nil {
			return dst, err
		}
		out, err := dec.DecodeAll(src, dst)
		if err != nil {
			if errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrWindowSizeExceeded) {
				return dst, ErrTooLarge
			}
			return dst, fmt.Errorf("codec: zstd: %w", err)
		}
		if len(out)-len(dst) > MaxDecompressed {
			return dst, ErrTooLarge
		}
		return out, nil
	}
	return dst, fmt.Errorf("%w %d", ErrUnknown, c)
}

// readAllLimited appends r's bytes to dst, failing past MaxDecompressed.
func readAllLimited(dst []byte, r io.Reader) ([]byte, error) {
	start := len(dst)
	buf := bytes.NewBuffer(dst)
	n, err := buf.ReadFrom(io.LimitReader(r, MaxDecompressed+1))
	if err != nil {
		return dst[:start], err
	}
	if n > MaxDecompressed {
		return dst[:start], ErrTooLarge
	}
	return buf.Bytes(), nil
}

// decodeSnappy handles both raw snappy blocks (franz-go, librdkafka) and
// the xerial framing (the Java client), checking every claimed length
// before allocating.
func decodeSnappy(dst, src []byte) ([]byte, error) {
	if !IsXerial(src) {
		return snappyBlock(dst, src, 0)
	}
	if len(src) < xerialPreamble {
		return dst, errors.New("codec: snappy: short xerial header")
	}
	start := len(dst)
	for pos := xerialPreamble; pos < len(src); {
		if len(src)-pos < 4 {
			return dst[:start], errors.New("codec: snappy: truncated xerial chunk length")
		}
		n := int(binary.BigEndian.Uint32(src[pos:]))
		pos += 4
		if n < 0 || n > len(src)-pos {
			return dst[:start], errors.New("codec: snappy: xerial chunk past the end")
		}
		var err error
		if dst, err = snappyBlock(dst, src[pos:pos+n], len(dst)-start); err != nil {
			return dst[:start], err
		}
		pos += n
	}
	return dst, nil
}

// snappyBlock appends one decoded raw block; sofar is what this batch
// already decoded, for the limit.
func snappyBlock(dst, src []byte, sofar int) ([]byte, error) {
	n, err := snappy.DecodedLen(src)
	if err != nil {
		return dst, fmt.Errorf("codec: snappy: %w", err)
	}
	if n > MaxDecompressed-sofar {
		return dst, ErrTooLarge
	}
	at := len(dst)
	dst = append(dst, make([]byte, n)...)
	out, err := snappy.Decode(dst[at:], src)
	if err != nil {
		return dst[:at], fmt.Errorf("codec: snappy: %w", err)
	}
	if len(out) != n {
		return dst[:at], errors.New("codec: snappy: decoded length differs from its header")
	}
	return dst, nil
}

// Compress appends src compressed with c to dst. Snappy output is a raw
// block (what franz-go and librdkafka write); CompressXerial frames it.
// gzip and zstd use their fastest levels: the callers are the load
// generator, which must never be the bottleneck, and the log cleaner,
// which rewrites in the background.
func Compress(c Codec, dst, src []byte) ([]byte, error) {
	switch c {
	case None:
		return append(dst, src...), nil
	case Gzip:
		w, _ := gzWriters.Get().(*gzip.Writer)
		if w == nil {
			w, _ = gzip.NewWriterLevel(nil, gzip.BestSpeed)
		}
		buf := bytes.NewBuffer(dst)
		w.Reset(buf)
		err := writeClose(w, src)
		gzWriters.Put(w)
		if err != nil {
			return dst, fmt.Errorf("codec: gzip: %w", err)
		}
		return buf.Bytes(), nil
	case Snappy:
		at := len(dst)
		dst = append(dst, make([]byte, snappy.MaxEncodedLen(len(src)))...)
		out := snappy.Encode(dst[at:], src)
		return dst[:at+len(out)], nil
	case LZ4:
		w, _ := lzWriters.Get().(*lz4.Writer)
		buf := bytes.NewBuffer(dst)
		if w == nil {
			w = lz4.NewWriter(buf)
			// No background goroutines, 64 KiB blocks: batches are small.
			if err := w.Apply(lz4.BlockSizeOption(lz4.Block64Kb), lz4.ConcurrencyOption(1)); err != nil {
				return dst, fmt.Errorf("codec: lz4: %w", err)
			}
		} else {
			w.Reset(buf)
		}
		err := writeClose(w, src)
		lzWriters.Put(w)
		if err != nil {
			return dst, fmt.Errorf("codec: lz4: %w", err)
		}
		return buf.Bytes(), nil
	case Zstd:
		_, enc, err := zstdCodecs()
		if err != nil {
			return dst, err
		}
		return enc.EncodeAll(src, dst), nil
	}
	return dst, fmt.Errorf("%w %d", ErrUnknown, c)
}

// writeClose writes src through the compressing writer w and closes it,
// which flushes the end of the stream.
func writeClose(w io.WriteCloser, src []byte) error {
	_, err := w.Write(src)
	if err == nil {
		err = w.Close()
	}
	return err
}

// CompressXerial appends src as xerial-framed snappy, so data that came
// framed is written back framed.
func CompressXerial(dst, src []byte) []byte {
	out := xerial.Encode(nil, src)
	return append(dst, out...)
}
