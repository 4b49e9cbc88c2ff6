package metadata

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
)

// Client quotas (KIP-13, KIP-546) live in the metadata log like ACLs: the
// controller validates and applies AlterClientQuotas, every broker reads
// the quotas from its image and enforces them on its own connections.

// Quota entity types and keys, spelled as Kafka spells them.
const (
	QuotaEntityUser     = "user"
	QuotaEntityClientID = "client-id"

	QuotaProducerByteRate  = "producer_byte_rate"
	QuotaConsumerByteRate  = "consumer_byte_rate"
	QuotaRequestPercentage = "request_percentage"
)

// QuotaName is one component of a quota entity: absent (Set false), the
// default (Default), or a specific name ("" is a valid name, as in Kafka).
type QuotaName struct {
	Set     bool   `json:",omitempty"`
	Default bool   `json:",omitempty"`
	Name    string `json:",omitempty"`
}

// Specific is a named component; DefaultName the default one.
func Specific(name string) QuotaName { return QuotaName{Set: true, Name: name} }

// DefaultName is the default component (Kafka's null entity name).
func DefaultName() QuotaName { return QuotaName{Set: true, Default: true} }

// QuotaEntity is what a quota is set on: a user, a client id, or both.
type QuotaEntity struct {
	User     QuotaName `json:",omitempty"`
	ClientID QuotaName `json:",omitempty"`
}

func (e QuotaEntity) String() string {
	part := func(typ string, n QuotaName) string {
		if n.Default {
			return typ + "=<default>"
		}
		return typ + "=" + n.Name
	}
	switch {
	case e.User.Set && e.ClientID.Set:
		return part("user", e.User) + "," + part("client-id", e.ClientID)
	case e.User.Set:
		return part("user", e.User)
	default:
		return part("client-id", e.ClientID)
	}
}

// ClientQuota is the quota values of one entity.
type ClientQuota struct {
	Entity QuotaEntity
	Values map[string]float64
}

// ClientQuotaAlteration sets and removes keys of one entity; an entity
// left with no values disappears.
type ClientQuotaAlteration struct {
	Entity QuotaEntity
	Set    map[string]float64 `json:",omitempty"`
	Remove []string           `json:",omitempty"`
}

// AlterClientQuotas applies alterations in order; each one's outcome is in
// Result.ItemErrs, and a refused one changes nothing.
type AlterClientQuotas struct{ Entries []ClientQuotaAlteration }

// ValidateQuotaAlteration checks an alteration as Kafka does: byte rates
// are longs (positive whole numbers), request_percentage a positive
// double (the share of one request handler's time, 200 = two handlers).
func ValidateQuotaAlteration(a ClientQuotaAlteration) error {
	if !a.Entity.User.Set && !a.Entity.ClientID.Set {
		return fmt.Errorf("%w: the entity names neither a user nor a client id", ErrInvalidQuota)
	}
	check := func(key string) error {
		switch key {
		case QuotaProducerByteRate, QuotaConsumerByteRate, QuotaRequestPercentage:
			return nil
		}
		return fmt.Errorf("%w: unknown quota key %q", ErrInvalidQuota, key)
	}
	for k, v := range a.Set {
		if err := check(k); err != nil {
			return err
		}
		if k == QuotaRequestPercentage {
			if math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 {
				return fmt.Errorf("%w: %s must be a positive number, not %v", ErrInvalidQuota, k, v)
			}
			continue
		}
		if math.IsNaN(v) || v <= 0 || v != math.Trunc(v) || v > math.MaxInt64 {
			return fmt.Errorf("%w: %s must be a positive whole number of bytes per second, not %v", ErrInvalidQuota, k, v)
		}
	}
	for _, k := range a.Remove {
		if err := check(k); err != nil {
			return err
		}
		if _, ok := a.Set[k]; ok {
			return fmt.Errorf("%w: %s is both set and removed", ErrInvalidQuota, k)
		}
	}
	return nil
}

func (t *txn) alterClientQuotas(c *AlterClientQuotas) Result {
	var res Result
	next := maps.Clone(t.im.quotas)
	if next == nil {
		next = map[QuotaEntity]map[string]float64{}
	}
	for _, a := range c.Entries {
		if err := ValidateQuotaAlteration(a); err != nil {
			res.ItemErrs = append(res.ItemErrs, err)
			continue
		}
		vals := maps.Clone(next[a.Entity])
		if vals == nil {
			vals = map[string]float64{}
		}
		maps.Copy(vals, a.Set)
		for _, k := range a.Remove {
			delete(vals, k)
		}
		if len(vals) == 0 {
			delete(next, a.Entity)
		} else {
			next[a.Entity] = vals
		}
		res.ItemErrs = append(res.ItemErrs, nil)
	}
	t.im.quotas = next
	return res
}

// ClientQuotas lists every entity with quotas, in a stable order.
func (im *Image) ClientQuotas() []ClientQuota {
	out := make([]ClientQuota, 0, len(im.quotas))
	for e, v := range im.quotas {
		out = append(out, ClientQuota{Entity: e, Values: v})
	}
	slices.SortFunc(out, func(a, b ClientQuota) int { return compareEntity(a.Entity, b.Entity) })
	return out
}

func compareName(a, b QuotaName) int {
	key := func(n QuotaName) int {
		switch {
		case !n.Set:
			return 0
		case n.Default:
			return 1
		}
		return 2
	}
	return cmp.Or(cmp.Compare(key(a), key(b)), cmp.Compare(a.Name, b.Name))
}

func compareEntity(a, b QuotaEntity) int {
	return cmp.Or(compareName(a.User, b.User), compareName(a.ClientID, b.ClientID))
}

// ClientQuota returns the values set on exactly e.
func (im *Image) ClientQuota(e QuotaEntity) (map[string]float64, bool) {
	v, ok := im.quotas[e]
	return v, ok
}

// HasClientQuotas reports whether any quota is set (brokers skip quota
// accounting entirely when none is).
func (im *Image) HasClientQuotas() bool { return len(im.quotas) > 0 }

// ResolveQuota finds the quota of key that applies to a connection of user
// with clientID, by Kafka's precedence (most specific first):
// user+client-id, user+default client-id, user, default user+client-id,
// default user+default client-id, default user, client-id, default
// client-id. It returns the entity that matched with its default
// components replaced by the connection's names (Kafka's quota metric
// tags: under a default quota each user or client id has its own budget),
// the bound, and whether any quota applies.
func (im *Image) ResolveQuota(key, user, clientID string) (QuotaEntity, float64, bool) {
	u, c, du, dc := Specific(user), Specific(clientID), DefaultName(), DefaultName()
	var none QuotaName
	order := [...]QuotaEntity{
		{u, c}, {u, dc}, {u, none}, {du, c}, {du, dc}, {du, none}, {none, c}, {none, dc},
	}
	for _, e := range order {
		if v, ok := im.quotas[e][key]; ok {
			tags := e
			if tags.User.Set {
				tags.User = u
			}
			if tags.ClientID.Set {
				tags.ClientID = c
			}
			return tags, v, true
		}
	}
	return QuotaEntity{}, 0, false
}

// Quota match types of DescribeClientQuotas (KIP-546).
const (
	QuotaMatchExact   int8 = 0
	QuotaMatchDefault int8 = 1
	QuotaMatchAny     int8 = 2
)

// QuotaFilterComponent is one component of a DescribeClientQuotas filter.
type QuotaFilterComponent struct {
	EntityType string
	MatchType  int8
	Match      *string // exact only
}

// DescribeClientQuotas returns the entities matching every component; with
// strict, entities with a component the filter does not name are left out.
// A malformed filter is ErrInvalidQuota.
func (im *Image) DescribeClientQuotas(components []QuotaFilterComponent, strict bool) ([]ClientQuota, error) {
	var user, client *QuotaFilterComponent
	for i := range components {
		f := &components[i]
		var slot **QuotaFilterComponent
		switch f.EntityType {
		case QuotaEntityUser:
			slot = &user
		case QuotaEntityClientID:
			slot = &client
		default:
			return nil, fmt.Errorf("%w: unsupported entity type %q", ErrInvalidQuota, f.EntityType)
		}
		if *slot != nil {
			return nil, fmt.Errorf("%w: entity type %q named twice", ErrInvalidQuota, f.EntityType)
		}
		switch f.MatchType {
		case QuotaMatchExact:
			if f.Match == nil {
				return nil, fmt.Errorf("%w: an exact match needs a name", ErrInvalidQuota)
			}
		case QuotaMatchDefault, QuotaMatchAny:
		default:
			return nil, fmt.Errorf("%w: match type %d", ErrInvalidQuota, f.MatchType)
		}
		*slot = f
	}
	matches := func(f *QuotaFilterComponent, n QuotaName) bool {
		if f == nil {
			return !strict || !n.Set
		}
		switch f.MatchType {
		case QuotaMatchExact:
			return n.Set && !n.Default && n.Name == *f.Match
		case QuotaMatchDefault:
			return n.Set && n.Default
		}
		return n.Set
	}
	var out []ClientQuota
	for _, q := range im.ClientQuotas() {
		if matches(user, q.Entity.User) && matches(client, q.Entity.ClientID) {
			out = append(out, q)
		}
	}
	return out, nil
}
