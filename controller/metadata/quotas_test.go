package metadata

import (
	"bytes"
	"errors"
	"math"
	"testing"
)

func TestClientQuotasApplyAndSnapshot(t *testing.T) {
	im := EmptyImage()
	alice, dflt := Specific("alice"), DefaultName()
	im2, res := applyOK(t, im, Command{AlterClientQuotas: &AlterClientQuotas{Entries: []ClientQuotaAlteration{
		{Entity: QuotaEntity{User: alice}, Set: map[string]float64{QuotaProducerByteRate: 1000}},
		{Entity: QuotaEntity{ClientID: dflt}, Set: map[string]float64{QuotaConsumerByteRate: 2000}},
		{Entity: QuotaEntity{User: alice}, Set: map[string]float64{QuotaRequestPercentage: 0}},
		{Entity: QuotaEntity{User: alice}, Set: map[string]float64{"bogus": 1}},
		{Entity: QuotaEntity{ClientID: Specific("c")}, Set: map[string]float64{QuotaProducerByteRate: 1.5}},
		{Entity: QuotaEntity{}, Set: map[string]float64{QuotaProducerByteRate: 1}},
	}}})
	if res.ItemErrs[0] != nil || res.ItemErrs[1] != nil {
		t.Fatalf("valid items refused: %v", res.ItemErrs)
	}
	for i := 2; i < 6; i++ {
		if !errors.Is(res.ItemErrs[i], ErrInvalidQuota) {
			t.Fatalf("item %d: %v, want ErrInvalidQuota", i, res.ItemErrs[i])
		}
	}
	if im.HasClientQuotas() {
		t.Fatal("the old image changed")
	}
	if v, ok := im2.ClientQuota(QuotaEntity{User: alice}); !ok || v[QuotaProducerByteRate] != 1000 || len(v) != 1 {
		t.Fatalf("alice: %v %v", v, ok)
	}
	var buf bytes.Buffer
	if err := im2.Encode(&buf); err != nil {
		t.Fatal(err)
	}
	back, err := DecodeImage(&buf)
	if err != nil || !back.Equal(im2) || back.Equal(im) {
		t.Fatalf("snapshot round trip: %v", err)
	}
	// Removing the last key removes the entity.
	im3, res := applyOK(t, im2, Command{AlterClientQuotas: &AlterClientQuotas{Entries: []ClientQuotaAlteration{
		{Entity: QuotaEntity{User: alice}, Remove: []string{QuotaProducerByteRate}},
	}}})
	if res.ItemErrs[0] != nil || len(im3.ClientQuotas()) != 1 {
		t.Fatalf("after removal: %v %v", res.ItemErrs, im3.ClientQuotas())
	}
	// A log written before quotas existed still applies (the field is
	// simply absent), and an old snapshot without quotas restores.
	if _, err := DecodeImage(bytes.NewReader([]byte(`{"Version":1,"Index":3,"ClusterID":"c"}`))); err != nil {
		t.Fatal(err)
	}
}

func TestResolveQuotaPrecedence(t *testing.T) {
	im := EmptyImage()
	u, c, d := Specific("u"), Specific("c"), DefaultName()
	var none QuotaName
	// Most specific first, Kafka's order.
	order := []QuotaEntity{{u, c}, {u, d}, {u, none}, {d, c}, {d, d}, {d, none}, {none, c}, {none, d}}
	for i := range order {
		im, _ = applyOK(t, im, Command{AlterClientQuotas: &AlterClientQuotas{Entries: []ClientQuotaAlteration{
			{Entity: order[i], Set: map[string]float64{QuotaProducerByteRate: float64(100 + i)}},
		}}})
	}
	for i := range order {
		e, v, ok := im.ResolveQuota(QuotaProducerByteRate, "u", "c")
		want := order[i]
		if want.User.Set {
			want.User = u
		}
		if want.ClientID.Set {
			want.ClientID = c
		}
		if !ok || v != float64(100+i) || e != want {
			t.Fatalf("step %d: got %v %v %v, want %v %v", i, e, v, ok, want, 100+i)
		}
		im, _ = applyOK(t, im, Command{AlterClientQuotas: &AlterClientQuotas{Entries: []ClientQuotaAlteration{
			{Entity: order[i], Remove: []string{QuotaProducerByteRate}},
		}}})
	}
	if _, _, ok := im.ResolveQuota(QuotaProducerByteRate, "u", "c"); ok {
		t.Fatal("quota left after removing all")
	}
	// Keys resolve independently, and a default client-id quota is tagged
	// with the connection's own client id (its own budget).
	im, _ = applyOK(t, im, Command{AlterClientQuotas: &AlterClientQuotas{Entries: []ClientQuotaAlteration{
		{Entity: QuotaEntity{ClientID: d}, Set: map[string]float64{QuotaConsumerByteRate: 7}},
		{Entity: QuotaEntity{User: u}, Set: map[string]float64{QuotaProducerByteRate: 9}},
	}}})
	if e, v, ok := im.ResolveQuota(QuotaConsumerByteRate, "u", "x"); !ok || v != 7 || e != (QuotaEntity{ClientID: Specific("x")}) {
		t.Fatalf("consumer: %v %v %v", e, v, ok)
	}
	if _, v, _ := im.ResolveQuota(QuotaProducerByteRate, "u", "x"); v != 9 {
		t.Fatalf("producer: %v", v)
	}
}

func TestDescribeClientQuotasMatching(t *testing.T) {
	u, c, d := Specific("u"), Specific("c"), DefaultName()
	var none QuotaName
	all := []QuotaEntity{{u, none}, {d, none}, {none, c}, {none, d}, {u, c}, {d, c}}
	im := EmptyImage()
	for _, e := range all {
		im, _ = applyOK(t, im, Command{AlterClientQuotas: &AlterClientQuotas{Entries: []ClientQuotaAlteration{
			{Entity: e, Set: map[string]float64{QuotaProducerByteRate: 1}},
		}}})
	}
	name := func(s string) *string { return &s }
	cases := []struct {
		f      []QuotaFilterComponent
		strict bool
		want   int
	}{
		{nil, false, 6},
		{nil, true, 0},
		{[]QuotaFilterComponent{{EntityType: "user", MatchType: QuotaMatchExact, Match: name("u")}}, false, 2},
		{[]QuotaFilterComponent{{EntityType: "user", MatchType: QuotaMatchExact, Match: name("u")}}, true, 1},
		{[]QuotaFilterComponent{{EntityType: "user", MatchType: QuotaMatchDefault}}, false, 2},
		{[]QuotaFilterComponent{{EntityType: "user", MatchType: QuotaMatchAny}}, true, 2},
		{[]QuotaFilterComponent{{EntityType: "client-id", MatchType: QuotaMatchAny}}, false, 4},
		{[]QuotaFilterComponent{{EntityType: "user", MatchType: QuotaMatchAny}, {EntityType: "client-id", MatchType: QuotaMatchExact, Match: name("c")}}, true, 2},
	}
	for i, tc := range cases {
		got, err := im.DescribeClientQuotas(tc.f, tc.strict)
		if err != nil || len(got) != tc.want {
			t.Fatalf("case %d: %d entities (%v), want %d", i, len(got), err, tc.want)
		}
	}
	for _, bad := range [][]QuotaFilterComponent{
		{{EntityType: "ip", MatchType: QuotaMatchAny}},
		{{EntityType: "user", MatchType: QuotaMatchAny}, {EntityType: "user", MatchType: QuotaMatchDefault}},
		{{EntityType: "user", MatchType: QuotaMatchExact}},
		{{EntityType: "user", MatchType: 5}},
	} {
		if _, err := im.DescribeClientQuotas(bad, false); !errors.Is(err, ErrInvalidQuota) {
			t.Fatalf("filter %v: %v", bad, err)
		}
	}
}

func TestValidateRequestPercentage(t *testing.T) {
	e := QuotaEntity{User: Specific("alice")}
	for _, v := range []float64{0.5, 50, 200} {
		if err := ValidateQuotaAlteration(ClientQuotaAlteration{Entity: e, Set: map[string]float64{QuotaRequestPercentage: v}}); err != nil {
			t.Fatalf("%v refused: %v", v, err)
		}
	}
	for _, v := range []float64{0, -1, math.NaN(), math.Inf(1)} {
		if err := ValidateQuotaAlteration(ClientQuotaAlteration{Entity: e, Set: map[string]float64{QuotaRequestPercentage: v}}); !errors.Is(err, ErrInvalidQuota) {
			t.Fatalf("%v: %v, want ErrInvalidQuota", v, err)
		}
	}
}
