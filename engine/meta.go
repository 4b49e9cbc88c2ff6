package engine

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"github.com/ringlog/ringlog/internal/vfs"
)

// topicState is a live topic. Its config may be read by appends while an
// admin call changes it, hence the lock.
type topicState struct {
	name  string
	id    [16]byte
	mu    sync.RWMutex
	cfg   TopicConfig
	parts []*Partition
}

func (t *topicState) config() TopicConfig {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.cfg
}

// hosted returns the indexes of the partitions with a local log.
func (t *topicState) hosted() []int32 {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := []int32{}
	for i, p := range t.parts {
		if p != nil {
			out = append(out, int32(i))
		}
	}
	return out
}

func (t *topicState) info() TopicInfo {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return TopicInfo{Name: t.name, ID: t.id, Partitions: int32(len(t.parts)), Config: t.cfg}
}

// metaStore persists topic metadata as one JSON file replaced atomically.
// It is the only owner of that file, so a raft controller can replace it.
type metaStore struct {
	fs   vfs.FS
	path string
}

type metaTopic struct {
	Name       string            `json:"name"`
	ID         string            `json:"id"` // 32 hex digits
	Partitions int32             `json:"partitions"`
	Configs    map[string]string `json:"configs,omitempty"`
	// Hosted lists the partitions with a local log when that is not all
	// of them (a cluster broker holds only its replicas); absent = all.
	Hosted *[]int32 `json:"hosted,omitempty"`
}

type metaFile struct {
	Version int         `json:"version"`
	Topics  []metaTopic `json:"topics"`
}

func newMetaStore(fs vfs.FS, dataDir string) (*metaStore, error) {
	dir := filepath.Join(dataDir, metaDirName)
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := fs.SyncDir(dataDir); err != nil {
		return nil, err
	}
	return &metaStore{fs: fs, path: filepath.Join(dir, topicsFileName)}, nil
}

func (m *metaStore) load() ([]metaTopic, error) {
	b, err := vfs.ReadFile(m.fs, m.path, 0)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var f metaFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorruptLog, m.path, err)
	}
	return f.Topics, nil
}

func (m *metaStore) save(topics []metaTopic) error {
	sort.Slice(topics, func(i, j int) bool { return topics[i].Name < topics[j].Name })
	b, err := json.MarshalIndent(metaFile{Version: 1, Topics: topics}, "", "  ")
	if err != nil {
		return err
	}
	return vfs.WriteFileAtomic(m.fs, m.path, b, 0o644)
}

func newTopicID() [16]byte {
	var id [16]byte
	rand.Read(id[:])
	return id
}

func parseTopicID(s string) ([16]byte, error) {
	var id [16]byte
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 16 {
		return id, fmt.Errorf("bad topic id %q", s)
	}
	copy(id[:], b)
	return id, nil
}
