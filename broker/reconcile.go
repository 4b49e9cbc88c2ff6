package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/ringlog/ringlog/controller/metadata"
	"github.com/ringlog/ringlog/engine"
	"github.com/ringlog/ringlog/internal/ratelog"
)

// The engine is reconciled with the controller's image: the image says
// which partitions this broker hosts, with which ids and configs, and who
// leads them; reconcile creates and deletes local logs to match and hands
// replicated partitions (more than one replica) to the replica manager
// (replicas.go), which makes this broker their leader or follower.
// wireServer is netpath.Cluster: handlers reconcile after an admin write
// and look topics up with a read barrier through it.

// reconcileLoop reconciles after every applied metadata entry. Changed is
// taken before the image is read, so no change is missed.
func (s *wireServer) reconcileLoop() {
	// The loop runs after every metadata change, broker heartbeats
	// included: a lasting cause such as a full disk is logged once a
	// minute, not every time.
	errLog := ratelog.New(s.log, slog.LevelError, "reconciling local logs with cluster metadata", time.Minute)
	for {
		ch := s.node.Changed()
		if err := s.reconcile(); s.ctx.Err() == nil {
			errLog.Report(err)
		}
		select {
		case <-ch:
		case <-s.ctx.Done():
			return
		}
	}
}

// Reconcile is reconcile, for netpath.Cluster.
func (s *wireServer) Reconcile() error { return s.reconcile() }

// reconcile makes the engine hold exactly the partitions the image assigns
// to this broker, with the image's topic ids and configs, and stamps each
// hosted partition with its leader epoch. It is idempotent and cheap when
// nothing changed. Only call it once the node is ready: an image that is
// behind (before the node caught up after a restart) would delete logs of
// topics it does not know yet.
func (s *wireServer) reconcile() error {
	s.recMu.Lock()
	defer s.recMu.Unlock()
	img := s.node.MetadataImage()
	me := s.nodeID
	keep := map[string]bool{}
	seen := map[tpKey]bool{}
	var errs []error
	if err := s.applyBrokerConfigs(img); err != nil {
		errs = append(errs, err)
	}
	if s.repl != nil {
		s.repl.throttle.sync(img, me)
	}
	for _, t := range img.Topics() {
		var hosted []int32
		for i, p := range t.Partitions {
			if slices.Contains(p.Replicas, me) {
				hosted = append(hosted, int32(i))
			}
		}
		if len(hosted) == 0 {
			continue
		}
		keep[t.Name] = true
		if s.repl != nil {
			s.repl.dropMovedAway(t.Name, s.engine.Hosted(t.Name), hosted)
		}
		err := s.engine.SyncTopic(engine.TopicSpec{
			Name: t.Name, ID: t.ID, Partitions: int32(len(t.Partitions)), Hosted: hosted, Configs: t.Configs,
		})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, i := range hosted {
			part, err := s.engine.Partition(t.Name, i)
			if err != nil {
				continue
			}
			if s.repl != nil {
				s.repl.syncPartition(t, i, t.Partitions[i], part, seen)
			} else if e := t.Partitions[i].LeaderEpoch; part.LeaderEpoch() != e {
				part.SetLeaderEpoch(e)
			}
		}
	}
	if s.repl != nil {
		s.repl.forgetUnseen(seen)
	}
	for _, ti := range s.engine.Topics() {
		if keep[ti.Name] {
			continue
		}
		s.log.Info("deleting local logs no longer assigned here", "topic", ti.Name)
		if err := s.engine.DeleteTopic(ti.Name); err != nil && !errors.Is(err, engine.ErrUnknownTopic) {
			errs = append(errs, err)
		}
	}
	if s.remoteReconcile != nil {
		// Once the engine holds the image's partitions, so the remote
		// state reaches new ones (it does no I/O).
		s.remoteReconcile(img)
	}
	return errors.Join(errs...)
}

// applyBrokerConfigs hands the engine the dynamic broker configs that
// apply here: the cluster-wide default ("") with this broker's own on top
// (Kafka's precedence). netpath validated them before proposing; a value
// that still fails (an image written by a newer version) is left out and
// reported, the rest applies.
func (s *wireServer) applyBrokerConfigs(img *metadata.Image) error {
	kv := maps.Clone(img.BrokerConfigs(""))
	if kv == nil {
		kv = map[string]string{}
	}
	maps.Copy(kv, img.BrokerConfigs(strconv.Itoa(int(s.nodeID))))
	var errs []error
	for k, v := range kv {
		if _, err := engine.BrokerDefaults(map[string]string{k: v}); err != nil {
			errs = append(errs, err)
			delete(kv, k)
		}
	}
	d, err := engine.BrokerDefaults(kv)
	if err == nil {
		var changed bool
		if changed, err = s.engine.SetDynamicDefaults(d); changed {
			s.log.Info("dynamic broker configs applied", "configs", kv)
		}
	}
	if err = errors.Join(append(errs, err)...); err != nil {
		return fmt.Errorf("dynamic broker configs: %w", err)
	}
	return nil
}

// LookupTopic finds topic in img, and when it is missing there asks the
// controller for a read barrier (bounded) and looks again in the newer
// image, which it returns: a topic created through another broker a moment
// ago is then found rather than reported unknown.
func (s *wireServer) LookupTopic(img *metadata.Image, name string) (metadata.Topic, *metadata.Image, bool) {
	if t, ok := img.Topic(name); ok {
		return t, img, true
	}
	ctx, cancel := context.WithTimeout(s.ctx, min(2*time.Second, s.cfg.Wire.AdminTimeout))
	defer cancel()
	if err := s.node.Sync(ctx); err != nil {
		return metadata.Topic{}, img, false
	}
	img = s.node.MetadataImage()
	t, ok := img.Topic(name)
	return t, img, ok
}

// lookupTopic is LookupTopic without the newer image.
func (s *wireServer) lookupTopic(img *metadata.Image, name string) (metadata.Topic, bool) {
	t, _, ok := s.LookupTopic(img, name)
	return t, ok
}
