package s3test

import (
	"bytes"
	"crypto/md5"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/johannesboyne/gofakes3"
)

// dirBackend is a gofakes3.Backend that keeps each bucket as a directory
// and each object as one file, so data survives Stop/Restart and a
// restart of the server process, and large objects are not held in
// memory.
//
// Object file layout: the object's bytes, a JSON header (objHeader), then
// the header's length as 4 bytes big-endian. The header goes last because
// the MD5 is known only after the body streamed through; keeping it and
// the data in one
// file lets a Put replace both with one rename, so a reader sees the old
// object or the new one, never a mix. File names are the url.PathEscape'd
// key (no '/' inside), which keeps a bucket one flat directory.
type dirBackend struct {
	root string
	// mu orders renames and deletes against listings; object reads and
	// the body of a Put run outside it, so one slow upload does not stall
	// other requests.
	mu sync.RWMutex
}

type objHeader struct {
	Meta    map[string]string `json:"meta,omitempty"`
	MD5     []byte            `json:"md5"`
	Size    int64             `json:"size"`
	ModTime time.Time         `json:"mtime"`
}

const (
	objSuffix = ".obj"
	// maxHeader bounds what a damaged file can make us allocate.
	maxHeader = 1 << 20
)

func newDirBackend(root string) (*dirBackend, error) {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, err
	}
	return &dirBackend{root: root}, nil
}

// bucketDir is the bucket's directory. Names starting with '.' (".",
// "..", the uploads directory) are no S3 bucket names; they map to a
// path that never exists instead of outside the root.
func (d *dirBackend) bucketDir(name string) string {
	if name == "" || strings.HasPrefix(name, ".") {
		return filepath.Join(d.root, ".invalid", "bucket")
	}
	return filepath.Join(d.root, url.PathEscape(name))
}

func (d *dirBackend) objPath(bucket, key string) string {
	return filepath.Join(d.bucketDir(bucket), url.PathEscape(key)+objSuffix)
}

func (d *dirBackend) ListBuckets() ([]gofakes3.BucketInfo, error) {
	ents, err := os.ReadDir(d.root)
	if err != nil {
		return nil, err
	}
	var out []gofakes3.BucketInfo
	for _, e := range ents {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue // .uploads, or not a bucket
		}
		name, err := url.PathUnescape(e.Name())
		if err != nil {
			continue
		}
		info, err := e.Info()
		if err != nil {
			return nil, err
		}
		out = append(out, gofakes3.BucketInfo{Name: name, CreationDate: gofakes3.NewContentTime(info.ModTime())})
	}
	return out, nil
}

// keys returns the bucket's keys, sorted. Lock should be held (read).
func (d *dirBackend) keys(bucket string) ([]string, error) {
	ents, err := os.ReadDir(d.bucketDir(bucket))
	if errors.Is(err, os.ErrNotExist) {
		return nil, gofakes3.BucketNotFound(bucket)
	} else if err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(ents))
	for _, e := range ents {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, objSuffix) {
			continue // temp files of Puts in flight
		}
		k, err := url.PathUnescape(strings.TrimSuffix(n, objSuffix))
		if err != nil {
			continue
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys, nil
}

func (d *dirBackend) ListBucket(name string, prefix *gofakes3.Prefix, page gofakes3.ListBucketPage) (*gofakes3.ObjectList, error) {
	if prefix == nil {
		prefix = &gofakes3.Prefix{}
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	keys, err := d.keys(name)
	if err != nil {
		return nil, err
	}
	list := gofakes3.NewObjectList()
	var match gofakes3.PrefixMatch
	var lastCommon string
	var n int64
	for i, k := range keys {
		if page.HasMarker && k <= page.Marker {
			continue
		}
		if !prefix.Match(k, &match) {
			continue
		}
		if match.CommonPrefix {
			if match.MatchedPart == lastCommon {
				continue
			}
			list.AddPrefix(match.MatchedPart)
			lastCommon = match.MatchedPart
		} else {
			h, err := d.readHeader(name, k)
			if errors.Is(err, os.ErrNotExist) {
				continue
			} else if err != nil {
				return nil, err
			}
			list.Add(&gofakes3.Content{
				Key:          k,
				LastModified: gofakes3.NewContentTime(h.ModTime),
				ETag:         gofakes3.FormatETag(h.MD5),
				Size:         h.Size,
			})
		}
		n++
		if page.MaxKeys > 0 && n >= page.MaxKeys {
			if i < len(keys)-1 {
				list.IsTruncated = true
				list.NextMarker = k
			}
			break
		}
	}
	return list, nil
}

func (d *dirBackend) CreateBucket(name string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := os.Mkdir(d.bucketDir(name), 0o755); errors.Is(err, os.ErrExist) {
		return gofakes3.ResourceError(gofakes3.ErrBucketAlreadyExists, name)
	} else if err != nil {
		return err
	}
	return nil
}

func (d *dirBackend) BucketExists(name string) (bool, error) {
	st, err := os.Stat(d.bucketDir(name))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	return st.IsDir(), nil
}

func (d *dirBackend) DeleteBucket(name string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	keys, err := d.keys(name)
	if err != nil {
		return err
	}
	if len(keys) > 0 {
		return gofakes3.ResourceError(gofakes3.ErrBucketNotEmpty, name)
	}
	return os.RemoveAll(d.bucketDir(name))
}

func (d *dirBackend) ForceDeleteBucket(name string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, err := os.Stat(d.bucketDir(name)); err != nil {
		return gofakes3.BucketNotFound(name)
	}
	return os.RemoveAll(d.bucketDir(name))
}

// open opens an object file and decodes its trailing header; the data
// is the file's first h.Size bytes.
func (d *dirBackend) open(bucket, key string) (*os.File, objHeader, error) {
	var h objHeader
	if ok, err := d.BucketExists(bucket); err != nil {
		return nil, h, err
	} else if !ok {
		return nil, h, gofakes3.BucketNotFound(bucket)
	}
	f, err := os.Open(d.objPath(bucket, key))
	if errors.Is(err, os.ErrNotExist) {
		return nil, h, gofakes3.KeyNotFound(key)
	} else if err != nil {
		return nil, h, err
	}
	bad := func(why string, args ...any) (*os.File, objHeader, error) {
		f.Close()
		return nil, h, fmt.Errorf("s3test: object file of %q: "+why, append([]any{key}, args...)...)
	}
	st, err := f.Stat()
	if err != nil {
		return bad("%w", err)
	}
	if st.Size() < 4 {
		return bad("%d bytes, too short", st.Size())
	}
	var lenBuf [4]byte
	if _, err := f.ReadAt(lenBuf[:], st.Size()-4); err != nil {
		return bad("%w", err)
	}
	hl := int64(binary.BigEndian.Uint32(lenBuf[:]))
	if hl > maxHeader || hl > st.Size()-4 {
		return bad("header length %d (file %d bytes)", hl, st.Size())
	}
	hb := make([]byte, hl)
	if _, err := f.ReadAt(hb, st.Size()-4-hl); err != nil {
		return bad("%w", err)
	}
	if err := json.Unmarshal(hb, &h); err != nil {
		return bad("header: %w", err)
	}
	if h.Size != st.Size()-4-hl {
		return bad("header says %d data bytes, file holds %d", h.Size, st.Size()-4-hl)
	}
	return f, h, nil
}

func (d *dirBackend) readHeader(bucket, key string) (objHeader, error) {
	f, h, err := d.open(bucket, key)
	if err != nil {
		return h, err
	}
	f.Close()
	return h, nil
}

type sectionCloser struct {
	io.Reader
	io.Closer
}

func (d *dirBackend) GetObject(bucket, key string, rr *gofakes3.ObjectRangeRequest) (*gofakes3.Object, error) {
	f, h, err := d.open(bucket, key)
	if err != nil {
		return nil, err
	}
	rng, err := rr.Range(h.Size)
	if err != nil {
		f.Close()
		return nil, err
	}
	start, length := int64(0), h.Size
	if rng != nil {
		start, length = rng.Start, rng.Length
	}
	return &gofakes3.Object{
		Name:     key,
		Metadata: h.Meta,
		Size:     h.Size,
		Contents: sectionCloser{io.NewSectionReader(f, start, length), f},
		Range:    rng,
		Hash:     h.MD5,
	}, nil
}

func (d *dirBackend) HeadObject(bucket, key string) (*gofakes3.Object, error) {
	h, err := d.readHeader(bucket, key)
	if err != nil {
		return nil, err
	}
	return &gofakes3.Object{Name: key, Metadata: h.Meta, Size: h.Size, Contents: io.NopCloser(bytes.NewReader(nil)), Hash: h.MD5}, nil
}

func (d *dirBackend) DeleteObject(bucket, key string) (gofakes3.ObjectDeleteResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if ok, err := d.BucketExists(bucket); err != nil {
		return gofakes3.ObjectDeleteResult{}, err
	} else if !ok {
		return gofakes3.ObjectDeleteResult{}, gofakes3.BucketNotFound(bucket)
	}
	// S3 answers success for a missing key.
	if err := os.Remove(d.objPath(bucket, key)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return gofakes3.ObjectDeleteResult{}, err
	}
	return gofakes3.ObjectDeleteResult{}, nil
}

func (d *dirBackend) DeleteMulti(bucket string, keys ...string) (gofakes3.MultiDeleteResult, error) {
	var res gofakes3.MultiDeleteResult
	for _, k := range keys {
		if _, err := d.DeleteObject(bucket, k); err != nil {
			res.Error = append(res.Error, gofakes3.ErrorResultFromError(err))
			continue
		}
		res.Deleted = append(res.Deleted, gofakes3.ObjectID{Key: k})
	}
	return res, nil
}

func (d *dirBackend) PutObject(bucket, key string, meta map[string]string, input io.Reader, size int64, cond *gofakes3.PutConditions) (gofakes3.PutObjectResult, error) {
	var res gofakes3.PutObjectResult
	if ok, err := d.BucketExists(bucket); err != nil {
		return res, err
	} else if !ok {
		return res, gofakes3.BucketNotFound(bucket)
	}
	// The body goes to a temp file first: a short body or a Content-MD5
	// mismatch (the hashing reader gofakes3 wraps input in fails at EOF)
	// leaves the old object untouched.
	tmp, err := os.CreateTemp(d.bucketDir(bucket), ".put-*")
	if err != nil {
		return res, err
	}
	defer os.Remove(tmp.Name()) // fails harmlessly after the rename
	defer tmp.Close()
	hasher := md5.New()
	n, err := io.Copy(io.MultiWriter(tmp, hasher), input)
	if err != nil {
		return res, err
	}
	if size >= 0 && n != size {
		return res, gofakes3.ErrIncompleteBody
	}
	hb, err := json.Marshal(objHeader{Meta: meta, MD5: hasher.Sum(nil), Size: n, ModTime: time.Now().UTC()})
	if err != nil {
		return res, err
	}
	hb = binary.BigEndian.AppendUint32(hb, uint32(len(hb)))
	if _, err := tmp.Write(hb); err != nil {
		return res, err
	}
	if err := tmp.Close(); err != nil {
		return res, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if cond != nil {
		info := &gofakes3.ConditionalObjectInfo{}
		if old, err := d.readHeader(bucket, key); err == nil {
			info.Exists, info.Hash = true, old.MD5
		}
		if err := gofakes3.CheckPutConditions(cond, info); err != nil {
			return res, err
		}
	}
	return res, os.Rename(tmp.Name(), d.objPath(bucket, key))
}

func (d *dirBackend) CopyObject(srcBucket, srcKey, dstBucket, dstKey string, meta map[string]string) (gofakes3.CopyObjectResult, error) {
	return gofakes3.CopyObject(d, srcBucket, srcKey, dstBucket, dstKey, meta)
}
