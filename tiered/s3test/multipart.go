package s3test

import (
	"crypto/md5"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/johannesboyne/gofakes3"
)

// Multipart uploads on disk. gofakes3's built-in uploader keeps every
// part in memory until completion and then concatenates them (twice the
// object in memory); segments are up to 1 GiB and several upload at once,
// so parts go to files instead:
//
//	<root>/.uploads/<id>/upload.json        bucket, key, metadata, start time
//	<root>/.uploads/<id>/<part>.<md5hex>    one file per part, its ETag in the name
//
// Completing streams the parts, in order, through PutObject (one copy,
// then an atomic rename). Abandoned uploads (a client killed mid-upload)
// stay on disk, as on S3 without a lifecycle rule.

const uploadsDir = ".uploads"

// minPart is S3's smallest part other than the last. S3 answers
// EntityTooSmall; gofakes3 has no such code, so this sends InvalidPart
// (also 400) with EntityTooSmall in the message.
const minPart = 5 << 20

type uploadInfo struct {
	Bucket    string            `json:"bucket"`
	Key       string            `json:"key"`
	Meta      map[string]string `json:"meta,omitempty"`
	Initiated time.Time         `json:"initiated"`
}

type partFile struct {
	num  int
	etag string // md5 hex, unquoted
	path string
	size int64
	mod  time.Time
}

var _ gofakes3.MultipartBackend = (*dirBackend)(nil)

// uploadDir validates an upload id from the wire (it becomes a path) and
// returns its directory.
func (d *dirBackend) uploadDir(id gofakes3.UploadID) (string, error) {
	s := string(id)
	if len(s) != 32 {
		return "", gofakes3.ErrNoSuchUpload
	}
	if _, err := hex.DecodeString(s); err != nil {
		return "", gofakes3.ErrNoSuchUpload
	}
	return filepath.Join(d.root, uploadsDir, s), nil
}

// upload loads an upload and checks it belongs to bucket/key.
func (d *dirBackend) upload(bucket, key string, id gofakes3.UploadID) (string, uploadInfo, error) {
	var info uploadInfo
	dir, err := d.uploadDir(id)
	if err != nil {
		return "", info, err
	}
	b, err := os.ReadFile(filepath.Join(dir, "upload.json"))
	if errors.Is(err, os.ErrNotExist) {
		return "", info, gofakes3.ErrNoSuchUpload
	} else if err != nil {
		return "", info, err
	}
	if err := json.Unmarshal(b, &info); err != nil {
		return "", info, fmt.Errorf("s3test: upload %s: %w", id, err)
	}
	if info.Bucket != bucket || info.Key != key {
		return "", info, gofakes3.ErrNoSuchUpload
	}
	return dir, info, nil
}

// parts lists an upload's part files by part number.
func parts(dir string) (map[int]partFile, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := make(map[int]partFile)
	for _, e := range ents {
		num, etag, ok := strings.Cut(e.Name(), ".")
		n, err := strconv.Atoi(num)
		if !ok || err != nil || len(etag) != 32 {
			continue // upload.json, temp files
		}
		fi, err := e.Info()
		if err != nil {
			return nil, err
		}
		out[n] = partFile{num: n, etag: etag, path: filepath.Join(dir, e.Name()), size: fi.Size(), mod: fi.ModTime()}
	}
	return out, nil
}

func (d *dirBackend) CreateMultipartUpload(bucket, key string, meta map[string]string) (gofakes3.UploadID, error) {
	if ok, err := d.BucketExists(bucket); err != nil {
		return "", err
	} else if !ok {
		return "", gofakes3.BucketNotFound(bucket)
	}
	var idb [16]byte
	if _, err := rand.Read(idb[:]); err != nil {
		return "", err
	}
	id := gofakes3.UploadID(hex.EncodeToString(idb[:]))
	dir, _ := d.uploadDir(id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	b, err := json.Marshal(uploadInfo{Bucket: bucket, Key: key, Meta: meta, Initiated: time.Now().UTC()})
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "upload.json"), b, 0o644); err != nil {
		return "", err
	}
	return id, nil
}

func (d *dirBackend) UploadPart(bucket, key string, id gofakes3.UploadID, num int, contentLength int64, input io.Reader) (string, error) {
	if num < 1 || num > gofakes3.MaxUploadPartNumber {
		return "", gofakes3.ErrInvalidPart
	}
	dir, _, err := d.upload(bucket, key, id)
	if err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(dir, ".part-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	h := md5.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), input) // fails on a Content-MD5 mismatch
	if err != nil {
		return "", err
	}
	if n != contentLength {
		return "", gofakes3.ErrIncompleteBody
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	etag := hex.EncodeToString(h.Sum(nil))
	d.mu.Lock()
	defer d.mu.Unlock()
	// A re-sent part replaces the earlier one.
	if old, err := parts(dir); err == nil {
		if p, ok := old[num]; ok {
			os.Remove(p.path)
		}
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, fmt.Sprintf("%05d.%s", num, etag))); err != nil {
		return "", err
	}
	return `"` + etag + `"`, nil
}

func (d *dirBackend) AbortMultipartUpload(bucket, key string, id gofakes3.UploadID) error {
	dir, _, err := d.upload(bucket, key, id)
	if err != nil {
		return err
	}
	return os.RemoveAll(dir)
}

func (d *dirBackend) CompleteMultipartUpload(bucket, key string, id gofakes3.UploadID, in *gofakes3.CompleteMultipartUploadRequest) (gofakes3.VersionID, string, error) {
	dir, info, err := d.upload(bucket, key, id)
	if err != nil {
		return "", "", err
	}
	have, err := parts(dir)
	if err != nil {
		return "", "", err
	}
	if len(in.Parts) == 0 {
		return "", "", gofakes3.ErrorMessage(gofakes3.ErrMalformedXML, "no parts")
	}
	var files []io.Reader
	var closers []io.Closer
	defer func() {
		for _, c := range closers {
			c.Close()
		}
	}()
	var size int64
	etagHash := md5.New()
	for i, p := range in.Parts {
		if i > 0 && p.PartNumber <= in.Parts[i-1].PartNumber {
			return "", "", gofakes3.ErrInvalidPartOrder
		}
		pf, ok := have[p.PartNumber]
		if !ok || strings.Trim(p.ETag, `"`) != pf.etag {
			return "", "", gofakes3.ErrorMessagef(gofakes3.ErrInvalidPart, "part %d: missing or ETag differs", p.PartNumber)
		}
		if i < len(in.Parts)-1 && pf.size < minPart {
			return "", "", gofakes3.ErrorMessagef(gofakes3.ErrInvalidPart, "EntityTooSmall: part %d is %d bytes, under 5 MiB", p.PartNumber, pf.size)
		}
		f, err := os.Open(pf.path)
		if err != nil {
			return "", "", err
		}
		closers = append(closers, f)
		files = append(files, f)
		size += pf.size
		raw, _ := hex.DecodeString(pf.etag)
		etagHash.Write(raw)
	}
	if _, err := d.PutObject(bucket, key, info.Meta, io.MultiReader(files...), size, nil); err != nil {
		return "", "", err
	}
	os.RemoveAll(dir)
	return "", fmt.Sprintf(`"%s-%d"`, hex.EncodeToString(etagHash.Sum(nil)), len(in.Parts)), nil
}

func (d *dirBackend) ListParts(bucket, key string, id gofakes3.UploadID, marker int, limit int64) (*gofakes3.ListMultipartUploadPartsResult, error) {
	dir, _, err := d.upload(bucket, key, id)
	if err != nil {
		return nil, err
	}
	have, err := parts(dir)
	if err != nil {
		return nil, err
	}
	nums := make([]int, 0, len(have))
	for n := range have {
		if n > marker {
			nums = append(nums, n)
		}
	}
	sort.Ints(nums)
	res := &gofakes3.ListMultipartUploadPartsResult{Bucket: bucket, Key: key, UploadID: id, PartNumberMarker: marker, MaxParts: limit}
	for i, n := range nums {
		if limit > 0 && int64(i) >= limit {
			res.IsTruncated = true
			res.NextPartNumberMarker = nums[i-1]
			break
		}
		p := have[n]
		res.Parts = append(res.Parts, gofakes3.ListMultipartUploadPartItem{
			PartNumber: n, ETag: `"` + p.etag + `"`, Size: p.size, LastModified: gofakes3.NewContentTime(p.mod),
		})
	}
	return res, nil
}

// ListMultipartUploads lists uploads in progress by key, then id. The
// delimiter is ignored (no common prefixes): nothing in ringlog lists
// uploads, this only has to be correct, not complete.
func (d *dirBackend) ListMultipartUploads(bucket string, marker *gofakes3.UploadListMarker, prefix gofakes3.Prefix, limit int64) (*gofakes3.ListMultipartUploadsResult, error) {
	ents, err := os.ReadDir(filepath.Join(d.root, uploadsDir))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	var items []gofakes3.ListMultipartUploadItem
	for _, e := range ents {
		id := gofakes3.UploadID(e.Name())
		b, err := os.ReadFile(filepath.Join(d.root, uploadsDir, e.Name(), "upload.json"))
		if err != nil {
			continue
		}
		var info uploadInfo
		if json.Unmarshal(b, &info) != nil || info.Bucket != bucket || !strings.HasPrefix(info.Key, prefix.Prefix) {
			continue
		}
		items = append(items, gofakes3.ListMultipartUploadItem{Key: info.Key, UploadID: id, StorageClass: "STANDARD", Initiated: gofakes3.NewContentTime(info.Initiated)})
	}
	sort.Slice(items, func(i, j int) bool {
		if items[i].Key != items[j].Key {
			return items[i].Key < items[j].Key
		}
		return items[i].UploadID < items[j].UploadID
	})
	res := &gofakes3.ListMultipartUploadsResult{Bucket: bucket, Prefix: prefix.Prefix, MaxUploads: limit}
	if marker != nil {
		res.KeyMarker, res.UploadIDMarker = marker.Object, marker.UploadID
	}
	for _, it := range items {
		if marker != nil && (it.Key < marker.Object || (it.Key == marker.Object && (marker.UploadID == "" || it.UploadID <= marker.UploadID))) {
			continue
		}
		if limit > 0 && int64(len(res.Uploads)) >= limit {
			res.IsTruncated = true
			last := res.Uploads[len(res.Uploads)-1]
			res.NextKeyMarker, res.NextUploadIDMarker = last.Key, last.UploadID
			break
		}
		res.Uploads = append(res.Uploads, it)
	}
	return res, nil
}
