package demo

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestOpenShopSeedsOnceAndKeepsChanges(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "shop.db")
	c := newClock()
	s, err := OpenShop(ctx, openDB(t, path), c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Refund(ctx, "k1", "signoff", RefundRequest{OrderID: "LK-793996", PaymentID: "PAY-793996-1", Amount: 9.95, Currency: "CAD", ReasonCode: "RFD-DEFECT"}); err != nil {
		t.Fatal(err)
	}
	// A second process opens the same file: nothing is seeded again and the
	// refund is still there.
	s2, err := OpenShop(ctx, openDB(t, path), c)
	if err != nil {
		t.Fatal(err)
	}
	if got := mustChanges(t, s2); len(got) != 1 || got[0].Key != "k1" {
		t.Fatalf("changes after reopen = %+v, want the one refund", got)
	}
	if p := paymentOf(t, s2, "LK-793996", "PAY-793996-1"); p.Status != "refunded" {
		t.Errorf("payment after reopen = %+v, want refunded", p)
	}
	ps, err := s2.Payments(ctx, "LK-507862")
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 2 {
		t.Errorf("LK-507862 has %d payments after reopen, want 2 (seeded once)", len(ps))
	}
}

func TestOpenShopRefusesNewerSchema(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, filepath.Join(t.TempDir(), "shop.db"))
	if _, err := db.Exec("PRAGMA user_version = 99"); err != nil {
		t.Fatal(err)
	}
	_, err := OpenShop(ctx, db, nil)
	if err == nil || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("OpenShop on a schema from the future: %v, want a refusal naming it", err)
	}
}

func TestSeedMatchesTheTickets(t *testing.T) {
	s, _ := newShop(t)
	ctx := context.Background()
	ps, err := s.Payments(ctx, "LK-507862")
	if err != nil {
		t.Fatal(err)
	}
	want := []Payment{
		{ID: "PAY-507862-1", OrderID: "LK-507862", Amount: "119.00", Currency: "CAD", Status: "captured", Refunded: "0.00", Remaining: "119.00"},
		{ID: "PAY-507862-2", OrderID: "LK-507862", Amount: "119.00", Currency: "CAD", Status: "captured", Refunded: "0.00", Remaining: "119.00"},
	}
	for i := range ps {
		ps[i].CreatedAt = ps[i].CreatedAt.UTC()
		want[i].CreatedAt = ps[i].CreatedAt
	}
	if len(ps) != 2 || ps[0] != want[0] || ps[1] != want[1] {
		t.Errorf("payments of LK-507862 = %+v, want two captured charges of 119.00 CAD", ps)
	}
	o, err := s.Order(ctx, "LK-640436")
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Items) == 0 || o.Items[0].SKU != "PLANTER" || o.Items[0].Quantity != 1 {
		t.Errorf("LK-640436 = %+v, want one PLANTER", o)
	}
	if p := paymentOf(t, s, "LK-793996", "PAY-793996-1"); p.Amount != "9.95" || p.Status != "captured" {
		t.Errorf("PAY-793996-1 = %+v, want captured 9.95", p)
	}
	for _, tk := range Tickets() {
		got, err := s.Ticket(ctx, tk)
		if err != nil || got.Body == "" {
			t.Errorf("ticket %s = %+v, %v; want the customer's text", tk, got, err)
		}
	}
	if _, err := s.Order(ctx, "LK-000000"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("unknown order: %v, want ErrNotFound", err)
	}
	if _, err := s.Payments(ctx, "LK-000000"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("payments of an unknown order: %v, want ErrNotFound", err)
	}
}

func TestRefundRules(t *testing.T) {
	type step struct {
		req      RefundRequest
		wantRule string // "" when the refund must succeed
	}
	refund := func(order, pay string, amount float64, cur string) RefundRequest {
		return RefundRequest{OrderID: order, PaymentID: pay, Amount: amount, Currency: cur, ReasonCode: "RFD-TEST"}
	}
	tests := []struct {
		name         string
		steps        []step
		wantStatus   string // of the last step's payment afterwards
		wantRefunded string
	}{
		{"full refund marks the payment refunded",
			[]step{{refund("LK-507862", "PAY-507862-2", 119.00, "CAD"), ""}}, "refunded", "119.00"},
		{"whole number amount",
			[]step{{refund("LK-507862", "PAY-507862-2", 119, "CAD"), ""}}, "refunded", "119.00"},
		{"partial then the rest",
			[]step{
				{refund("LK-311208", "PAY-311208-1", 20.50, "USD"), ""},
				{refund("LK-311208", "PAY-311208-1", 68.00, "USD"), ""},
			}, "refunded", "88.50"},
		{"partial keeps it captured",
			[]step{{refund("LK-311208", "PAY-311208-1", 0.01, "USD"), ""}}, "captured", "0.01"},
		{"partial then more than the rest",
			[]step{
				{refund("LK-311208", "PAY-311208-1", 50, "USD"), ""},
				{refund("LK-311208", "PAY-311208-1", 38.51, "USD"), "exceeds-remaining"},
			}, "captured", "50.00"},
		{"more than captured",
			[]step{{refund("LK-507862", "PAY-507862-2", 119.01, "CAD"), "exceeds-remaining"}}, "captured", "0.00"},
		{"a refunded payment",
			[]step{{refund("LK-452190", "PAY-452190-1", 10, "CAD"), "payment-not-captured"}}, "refunded", "89.00"},
		{"refunded twice with two keys",
			[]step{
				{refund("LK-793996", "PAY-793996-1", 9.95, "CAD"), ""},
				{refund("LK-793996", "PAY-793996-1", 9.95, "CAD"), "payment-not-captured"},
			}, "refunded", "9.95"},
		{"an authorized charge is not captured",
			[]step{{refund("LK-128844", "PAY-128844-1", 45, "CAD"), "payment-not-captured"}}, "authorized", "0.00"},
		{"wrong currency",
			[]step{{refund("LK-507862", "PAY-507862-2", 119, "USD"), "currency-mismatch"}}, "captured", "0.00"},
		{"payment of another order",
			[]step{{refund("LK-793996", "PAY-507862-2", 9.95, "CAD"), "payment-not-of-order"}}, "captured", "0.00"},
		{"unknown order",
			[]step{{refund("LK-000000", "PAY-507862-2", 1, "CAD"), "order-not-found"}}, "captured", "0.00"},
		{"unknown payment",
			[]step{{refund("LK-507862", "PAY-507862-9", 1, "CAD"), "payment-not-found"}}, "captured", "0.00"},
		{"three decimals",
			[]step{{refund("LK-507862", "PAY-507862-2", 1.005, "CAD"), "invalid-amount"}}, "captured", "0.00"},
		{"zero",
			[]step{{refund("LK-507862", "PAY-507862-2", 0, "CAD"), "invalid-amount"}}, "captured", "0.00"},
		{"negative",
			[]step{{refund("LK-507862", "PAY-507862-2", -5, "CAD"), "invalid-amount"}}, "captured", "0.00"},
		{"lower-case currency",
			[]step{{refund("LK-507862", "PAY-507862-2", 5, "cad"), "invalid-args"}}, "captured", "0.00"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := newShop(t)
			ctx := context.Background()
			succeeded := 0
			for i, st := range tt.steps {
				key := "key-" + string(rune('a'+i))
				rc, err := s.Refund(ctx, key, "signoff", st.req)
				if got := refusedRule(t, err); got != st.wantRule {
					t.Fatalf("step %d: refund %+v: err %v (rule %q), want rule %q", i, st.req, err, got, st.wantRule)
				}
				if st.wantRule != "" {
					if _, found, _ := s.Lookup(ctx, key); found {
						t.Errorf("step %d: refused refund is in the register", i)
					}
					continue
				}
				succeeded++
				if !strings.HasPrefix(rc.ID, "RF-") || len(rc.Detail) == 0 {
					t.Errorf("step %d: receipt %+v, want an RF- id and a detail", i, rc)
				}
			}
			last := tt.steps[len(tt.steps)-1].req
			if last.OrderID != "LK-000000" && last.PaymentID != "PAY-507862-9" {
				order := last.OrderID
				if tt.name == "payment of another order" {
					order = "LK-507862"
				}
				p := paymentOf(t, s, order, last.PaymentID)
				if p.Status != tt.wantStatus || p.Refunded != tt.wantRefunded {
					t.Errorf("payment afterwards: status %s refunded %s, want %s %s", p.Status, p.Refunded, tt.wantStatus, tt.wantRefunded)
				}
			}
			if got := len(mustChanges(t, s)); got != succeeded {
				t.Errorf("%d changes in the shop, want %d", got, succeeded)
			}
		})
	}
}

func TestRefundIsIdempotent(t *testing.T) {
	s, _ := newShop(t)
	ctx := context.Background()
	req := RefundRequest{OrderID: "LK-507862", PaymentID: "PAY-507862-2", Amount: 119.00, Currency: "CAD", ReasonCode: "RFD-DOUBLE"}

	if _, found, err := s.Lookup(ctx, "run-1/0"); err != nil || found {
		t.Fatalf("Lookup before: found %v, err %v; want not found", found, err)
	}
	first, err := s.Refund(ctx, "run-1/0", "signoff", req)
	if err != nil {
		t.Fatal(err)
	}
	// The charge is now refunded, so only the register can make this succeed.
	again, err := s.Refund(ctx, "run-1/0", "signoff", req)
	if err != nil {
		t.Fatalf("same key again: %v, want the first receipt", err)
	}
	if again.ID != first.ID || string(again.Detail) != string(first.Detail) {
		t.Errorf("same key again: receipt %+v, want %+v", again, first)
	}
	// 119 and 119.00 are the same arguments.
	req.Amount = 119
	if _, err := s.Refund(ctx, "run-1/0", "signoff", req); err != nil {
		t.Errorf("same key, amount written as 119: %v, want the first receipt", err)
	}
	got, found, err := s.Lookup(ctx, "run-1/0")
	if err != nil || !found || got.ID != first.ID {
		t.Errorf("Lookup after: %+v found %v err %v, want %s", got, found, err, first.ID)
	}
	if ch := mustChanges(t, s); len(ch) != 1 {
		t.Fatalf("%d changes, want exactly one refund: %+v", len(ch), ch)
	}

	// The same key with other arguments is a different request: refused,
	// and nothing changes (PAY-507862-1 stays captured).
	other := RefundRequest{OrderID: "LK-507862", PaymentID: "PAY-507862-1", Amount: 119.00, Currency: "CAD", ReasonCode: "RFD-DOUBLE"}
	_, err = s.Refund(ctx, "run-1/0", "signoff", other)
	if rule := refusedRule(t, err); rule != "key-reused" {
		t.Errorf("same key, other payment: %v, want key-reused", err)
	}
	if p := paymentOf(t, s, "LK-507862", "PAY-507862-1"); p.Status != "captured" {
		t.Errorf("PAY-507862-1 is %s after a refused key reuse", p.Status)
	}
	// A key of a refund cannot be replayed as a reshipment either.
	_, err = s.Reship(ctx, "run-1/0", "signoff", ReshipRequest{OrderID: "LK-507862", SKU: "DESKLAMP", Quantity: 1})
	if rule := refusedRule(t, err); rule != "key-reused" {
		t.Errorf("refund key used for a reshipment: %v, want key-reused", err)
	}
	if ch := mustChanges(t, s); len(ch) != 1 {
		t.Errorf("%d changes after refused reuses, want 1", len(ch))
	}
}

func TestConcurrentSameKeyRefundsOnce(t *testing.T) {
	s, _ := newShop(t)
	ctx := context.Background()
	req := RefundRequest{OrderID: "LK-311208", PaymentID: "PAY-311208-1", Amount: 10, Currency: "USD", ReasonCode: "RFD-GOODWILL"}
	const n = 8
	ids := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			rc, err := s.Refund(ctx, "run-7/0", "signoff", req)
			ids[i], errs[i] = rc.ID, err
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil || ids[i] != ids[0] {
			t.Errorf("caller %d: %q, %v; want receipt %q", i, ids[i], errs[i], ids[0])
		}
	}
	if p := paymentOf(t, s, "LK-311208", "PAY-311208-1"); p.Refunded != "10.00" {
		t.Errorf("refunded %s after %d concurrent calls with one key, want 10.00", p.Refunded, n)
	}
}

func TestReshipAndLabelRules(t *testing.T) {
	tests := []struct {
		name     string
		do       func(s *Shop, key string) error
		wantRule string
	}{
		{"reship the cracked planter", func(s *Shop, key string) error {
			_, err := s.Reship(context.Background(), key, "signoff", ReshipRequest{OrderID: "LK-640436", SKU: "PLANTER", Quantity: 1})
			return err
		}, ""},
		{"reship more than ordered", func(s *Shop, key string) error {
			_, err := s.Reship(context.Background(), key, "signoff", ReshipRequest{OrderID: "LK-640436", SKU: "PLANTER", Quantity: 2})
			return err
		}, "exceeds-ordered"},
		{"reship all of a line", func(s *Shop, key string) error {
			_, err := s.Reship(context.Background(), key, "signoff", ReshipRequest{OrderID: "LK-640436", SKU: "SOIL-5L", Quantity: 2})
			return err
		}, ""},
		{"reship a sku not on the order", func(s *Shop, key string) error {
			_, err := s.Reship(context.Background(), key, "signoff", ReshipRequest{OrderID: "LK-640436", SKU: "DESKLAMP", Quantity: 1})
			return err
		}, "sku-not-on-order"},
		{"reship zero", func(s *Shop, key string) error {
			_, err := s.Reship(context.Background(), key, "signoff", ReshipRequest{OrderID: "LK-640436", SKU: "PLANTER", Quantity: 0})
			return err
		}, "invalid-args"},
		{"reship on an unknown order", func(s *Shop, key string) error {
			_, err := s.Reship(context.Background(), key, "signoff", ReshipRequest{OrderID: "LK-000000", SKU: "PLANTER", Quantity: 1})
			return err
		}, "order-not-found"},
		{"label for the planter", func(s *Shop, key string) error {
			_, err := s.CreateReturnLabel(context.Background(), key, "signoff", ReturnLabelRequest{OrderID: "LK-640436", SKU: "PLANTER", Reason: "damaged", FreeShipping: true})
			return err
		}, ""},
		{"label for a sku not on the order", func(s *Shop, key string) error {
			_, err := s.CreateReturnLabel(context.Background(), key, "signoff", ReturnLabelRequest{OrderID: "LK-640436", SKU: "KETTLE", Reason: "damaged"})
			return err
		}, "sku-not-on-order"},
		{"label without a reason", func(s *Shop, key string) error {
			_, err := s.CreateReturnLabel(context.Background(), key, "signoff", ReturnLabelRequest{OrderID: "LK-640436", SKU: "PLANTER"})
			return err
		}, "invalid-args"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := newShop(t)
			err := tt.do(s, "k")
			if got := refusedRule(t, err); got != tt.wantRule || (tt.wantRule == "" && err != nil) {
				t.Fatalf("err %v (rule %q), want rule %q", err, got, tt.wantRule)
			}
			want := 0
			if tt.wantRule == "" {
				want = 1
			}
			if got := len(mustChanges(t, s)); got != want {
				t.Errorf("%d changes, want %d", got, want)
			}
		})
	}
}

func TestReshipsNeverExceedTheOrderInTotal(t *testing.T) {
	s, _ := newShop(t)
	ctx := context.Background()
	req := ReshipRequest{OrderID: "LK-311208", SKU: "MUG-OAT", Quantity: 3}
	if _, err := s.Reship(ctx, "a", "signoff", req); err != nil {
		t.Fatal(err)
	}
	// Replaying the first key is fine; a second reshipment of 3 would send
	// 6 replacements for 4 mugs.
	if _, err := s.Reship(ctx, "a", "signoff", req); err != nil {
		t.Errorf("replay: %v", err)
	}
	_, err := s.Reship(ctx, "b", "signoff", req)
	if rule := refusedRule(t, err); rule != "exceeds-ordered" {
		t.Errorf("second reshipment of 3 of 4 mugs: %v, want exceeds-ordered", err)
	}
	req.Quantity = 1
	if _, err := s.Reship(ctx, "c", "signoff", req); err != nil {
		t.Errorf("the fourth mug: %v", err)
	}
}

func TestChangesListEveryChangeOldestFirst(t *testing.T) {
	s, c := newShop(t)
	ctx := context.Background()
	if _, err := s.Reship(ctx, "run-2/0", "signoff", ReshipRequest{OrderID: "LK-640436", SKU: "PLANTER", Quantity: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateReturnLabel(ctx, "run-2/1", "signoff", ReturnLabelRequest{OrderID: "LK-640436", SKU: "PLANTER", Reason: "damaged", FreeShipping: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Refund(ctx, "run-3/0", "signoff", RefundRequest{OrderID: "LK-793996", PaymentID: "PAY-793996-1", Amount: 9.95, Currency: "CAD", ReasonCode: "RFD-DEFECT"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ManualRefund(ctx, "LK-311208", "PAY-311208-1", "5", "amira"); err != nil {
		t.Fatal(err)
	}
	got := mustChanges(t, s)
	want := []Change{
		{Kind: "reshipment", OrderID: "LK-640436", SKU: "PLANTER", Quantity: 1, Key: "run-2/0", By: "signoff"},
		{Kind: "return_label", OrderID: "LK-640436", SKU: "PLANTER", Key: "run-2/1", By: "signoff"},
		{Kind: "refund", OrderID: "LK-793996", PaymentID: "PAY-793996-1", Amount: "9.95", Currency: "CAD", Key: "run-3/0", By: "signoff"},
		{Kind: "refund", OrderID: "LK-311208", PaymentID: "PAY-311208-1", Amount: "5.00", Currency: "USD", Key: "manual-1", By: "amira"},
	}
	if len(got) != len(want) {
		t.Fatalf("changes = %+v, want %d", got, len(want))
	}
	prefix := map[string]string{"refund": "RF-", "reshipment": "RS-", "return_label": "RL-"}
	for i := range want {
		g := got[i]
		if !strings.HasPrefix(g.ID, prefix[g.Kind]) {
			t.Errorf("change %d id %q, want prefix %s", i, g.ID, prefix[g.Kind])
		}
		if i > 0 && !g.At.After(got[i-1].At) {
			t.Errorf("change %d at %v is not after change %d at %v", i, g.At, i-1, got[i-1].At)
		}
		if g.At.After(c.Now()) {
			t.Errorf("change %d stamped %v, after the clock", i, g.At)
		}
		g.ID, g.At = "", want[i].At
		if g != want[i] {
			t.Errorf("change %d = %+v, want %+v", i, g, want[i])
		}
	}
}

// The world moves while a run waits: the charge is refunded by hand, and the
// approved refund must then be refused with only the manual refund existing.
func TestManualRefundThenApprovedRefundIsRefused(t *testing.T) {
	s, _ := newShop(t)
	ctx := context.Background()
	ex := Executors(s, "signoff")[ActionRefund]
	a := record.Action{Name: ActionRefund, Args: []byte(`{"order_id":"LK-507862","payment_id":"PAY-507862-2","amount":119,"currency":"CAD","reason_code":"RFD-DOUBLE"}`)}
	if err := ex.Check(ctx, a); err != nil {
		t.Fatalf("check before the manual refund: %v", err)
	}

	ch, err := s.ManualRefund(ctx, "LK-507862", "PAY-507862-2", "119.00", "amira")
	if err != nil {
		t.Fatal(err)
	}
	if ch.Key != "manual-1" || ch.Amount != "119.00" || ch.Currency != "CAD" || ch.By != "amira" {
		t.Errorf("manual refund = %+v", ch)
	}

	_, err = ex.Execute(ctx, "run-9/0", a)
	if rule := refusedRule(t, err); rule != "payment-not-captured" {
		t.Fatalf("approved refund after the manual one: %v, want payment-not-captured", err)
	}
	if !strings.Contains(err.Error(), "PAY-507862-2 is not a captured charge of LK-507862") {
		t.Errorf("message %q does not say why", err)
	}
	if _, found, err := ex.Lookup(ctx, "run-9/0"); err != nil || found {
		t.Errorf("Lookup of the refused key: found %v, err %v", found, err)
	}
	changes := mustChanges(t, s)
	if len(changes) != 1 || changes[0].Key != "manual-1" {
		t.Errorf("changes = %+v, want only the manual refund", changes)
	}
}

func TestManualRefundInput(t *testing.T) {
	s, _ := newShop(t)
	ctx := context.Background()
	tests := []struct {
		order, pay, amount, by string
		wantRule               string
	}{
		{"LK-311208", "PAY-311208-1", "1.50", "", "invalid-args"},
		{"LK-311208", "PAY-311208-1", "1.505", "amira", "invalid-amount"},
		{"LK-311208", "PAY-311208-1", "-1", "amira", "invalid-amount"},
		{"LK-311208", "PAY-311208-1", "abc", "amira", "invalid-amount"},
		{"LK-311208", "PAY-000000-1", "1", "amira", "payment-not-found"},
		{"LK-311208", "PAY-311208-1", "100", "amira", "exceeds-remaining"},
		{"LK-507862", "PAY-311208-1", "1", "amira", "payment-not-of-order"},
		{"LK-311208", "PAY-311208-1", "1.50", "amira", ""},
		{"LK-311208", "PAY-311208-1", "2", "amira", ""},
	}
	for _, tt := range tests {
		_, err := s.ManualRefund(ctx, tt.order, tt.pay, tt.amount, tt.by)
		if got := refusedRule(t, err); got != tt.wantRule || (tt.wantRule == "" && err != nil) {
			t.Errorf("ManualRefund(%s, %s, %q, %q): %v, want rule %q", tt.order, tt.pay, tt.amount, tt.by, err, tt.wantRule)
		}
	}
	ch := mustChanges(t, s)
	if len(ch) != 2 || ch[0].Key != "manual-1" || ch[1].Key != "manual-2" || ch[1].Amount != "2.00" {
		t.Errorf("changes = %+v, want manual-1 and manual-2", ch)
	}
}

func TestWriteOnAClosedShopIsTransient(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, filepath.Join(t.TempDir(), "shop.db"))
	s, err := OpenShop(ctx, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	_, err = s.Refund(ctx, "k", "signoff", RefundRequest{OrderID: "LK-793996", PaymentID: "PAY-793996-1", Amount: 9.95, Currency: "CAD", ReasonCode: "RFD-DEFECT"})
	var tr interface{ Transient() bool }
	if !errors.As(err, &tr) || !tr.Transient() {
		t.Errorf("refund on a closed database: %v, want a transient error (nothing was written)", err)
	}
	if _, _, err := s.Lookup(ctx, "k"); err == nil {
		t.Error("Lookup on a closed database says it can tell")
	}
}
