package demo

import (
	"context"
	"embed"
	"fmt"
	"strings"

	"github.com/signoff-dev/signoff/workflow"
)

// The names of the actions the shop carries out.
const (
	ActionRefund      = "request_refund"
	ActionReship      = "reship_item"
	ActionReturnLabel = "create_return_label"
)

//go:embed schemas/*.json
var schemaFS embed.FS

// Schemas returns the JSON Schema (draft 2020-12) of each action's arguments,
// by action name. The caller may keep and change the slices.
func Schemas() map[string][]byte {
	out := make(map[string][]byte, 3)
	for _, name := range []string{ActionRefund, ActionReship, ActionReturnLabel} {
		b, err := schemaFS.ReadFile("schemas/" + name + ".json")
		if err != nil {
			// Embedded at build time; missing means a broken build.
			panic(fmt.Sprintf("demo: schema of %s: %v", name, err))
		}
		out[name] = b
	}
	return out
}

// Executors returns the executors of the shop's actions, by action name. by
// names who makes the changes in the shop's register (for example "signoff").
func Executors(shop *Shop, by string) map[string]workflow.Executor {
	return map[string]workflow.Executor{
		ActionRefund:      &RefundExecutor{Shop: shop, By: by},
		ActionReship:      &ReshipExecutor{Shop: shop, By: by},
		ActionReturnLabel: &ReturnLabelExecutor{Shop: shop, By: by},
	}
}

// RefundExecutor carries out request_refund.
type RefundExecutor struct {
	Shop *Shop
	By   string
}

// ReshipExecutor carries out reship_item.
type ReshipExecutor struct {
	Shop *Shop
	By   string
}

// ReturnLabelExecutor carries out create_return_label.
type ReturnLabelExecutor struct {
	Shop *Shop
	By   string
}

var (
	_ workflow.Executor = (*RefundExecutor)(nil)
	_ workflow.Executor = (*ReshipExecutor)(nil)
	_ workflow.Executor = (*ReturnLabelExecutor)(nil)
)

// The wire forms use pointers so that a missing field is told apart from a
// zero one; the schema requires every field, and so does the executor.
type refundArgs struct {
	OrderID    *string  `json:"order_id"`
	PaymentID  *string  `json:"payment_id"`
	Amount     *float64 `json:"amount"`
	Currency   *string  `json:"currency"`
	ReasonCode *string  `json:"reason_code"`
}

type reshipArgs struct {
	OrderID  *string `json:"order_id"`
	SKU      *string `json:"sku"`
	Quantity *int    `json:"quantity"`
}

type returnLabelArgs struct {
	OrderID      *string `json:"order_id"`
	SKU          *string `json:"sku"`
	Reason       *string `json:"reason"`
	FreeShipping *bool   `json:"free_shipping"`
}

// decodeArgs decodes a's arguments strictly into v after checking that a is
// the action this executor carries out. Undecodable arguments never become
// decodable, so the error is permanent.
func decodeArgs(a record.Action, want string, v any) error {
	if a.Name != want {
		return refused("wrong-action", "the %s executor was given a %q action", want, a.Name)
	}
	if err := workflow.DecodeStrict(a.Args, v); err != nil {
		return refused("invalid-args", "%s arguments: %v", want, err)
	}
	return nil
}

// field names a required argument and whether it was absent.
type field struct {
	name   string
	absent bool
}

func missing(action string, fields ...field) error {
	var names []string
	for _, f := range fields {
		if f.absent {
			names = append(names, f.name)
		}
	}
	if len(names) > 0 {
		return refused("invalid-args", "%s arguments: missing %s", action, strings.Join(names, ", "))
	}
	return nil
}

func decodeRefund(a record.Action) (RefundRequest, error) {
	var w refundArgs
	if err := decodeArgs(a, ActionRefund, &w); err != nil {
		return RefundRequest{}, err
	}
	if err := missing(ActionRefund, field{"order_id", w.OrderID == nil}, field{"payment_id", w.PaymentID == nil},
		field{"amount", w.Amount == nil}, field{"currency", w.Currency == nil}, field{"reason_code", w.ReasonCode == nil}); err != nil {
		return RefundRequest{}, err
	}
	return RefundRequest{OrderID: *w.OrderID, PaymentID: *w.PaymentID, Amount: *w.Amount,
		Currency: *w.Currency, ReasonCode: *w.ReasonCode}, nil
}

func decodeReship(a record.Action) (ReshipRequest, error) {
	var w reshipArgs
	if err := decodeArgs(a, ActionReship, &w); err != nil {
		return ReshipRequest{}, err
	}
	if err := missing(ActionReship, field{"order_id", w.OrderID == nil}, field{"sku", w.SKU == nil},
		field{"quantity", w.Quantity == nil}); err != nil {
		return ReshipRequest{}, err
	}
	return ReshipRequest{OrderID: *w.OrderID, SKU: *w.SKU, Quantity: *w.Quantity}, nil
}

func decodeReturnLabel(a record.Action) (ReturnLabelRequest, error) {
	var w returnLabelArgs
	if err := decodeArgs(a, ActionReturnLabel, &w); err != nil {
		return ReturnLabelRequest{}, err
	}
	if err := missing(ActionReturnLabel, field{"order_id", w.OrderID == nil}, field{"sku", w.SKU == nil},
		field{"reason", w.Reason == nil}, field{"free_shipping", w.FreeShipping == nil}); err != nil {
		return ReturnLabelRequest{}, err
	}
	return ReturnLabelRequest{OrderID: *w.OrderID, SKU: *w.SKU, Reason: *w.Reason, FreeShipping: *w.FreeShipping}, nil
}

// lookup asks the register and makes sure the key was used for this kind of
// change: a key of another kind means the ledgers disagree, and nobody can
// tell what happened.
func lookup(ctx context.Context, shop *Shop, key, kind string) (record.Receipt, bool, error) {
	rc, got, found, err := shop.lookupKind(ctx, key)
	if err != nil || !found {
		return record.Receipt{}, false, err
	}
	if got != kind {
		// A final answer, not a register that is down: asking again would
		// only be told the same.
		return record.Receipt{}, false, workflow.Permanent(fmt.Errorf("lookup %s: the key was used for a %s, not a %s", key, got, kind))
	}
	return rc, true, nil
}

// Check verifies, without changing anything, that the refund is allowed now.
func (e *RefundExecutor) Check(ctx context.Context, a record.Action) error {
	r, err := decodeRefund(a)
	if err == nil {
		err = e.Shop.CheckRefund(ctx, r)
	}
	if err != nil {
		return fmt.Errorf("check refund: %w", err)
	}
	return nil
}

// Execute refunds under key; the shop checks its rules again as it writes.
func (e *RefundExecutor) Execute(ctx context.Context, key string, a record.Action) (record.Receipt, error) {
	r, err := decodeRefund(a)
	if err != nil {
		return record.Receipt{}, fmt.Errorf("refund %s: %w", key, err)
	}
	return e.Shop.Refund(ctx, key, e.By, r)
}

// Lookup asks the shop's register whether the refund under key happened.
func (e *RefundExecutor) Lookup(ctx context.Context, key string) (record.Receipt, bool, error) {
	return lookup(ctx, e.Shop, key, KindRefund)
}

// Check verifies, without changing anything, that the reshipment is allowed now.
func (e *ReshipExecutor) Check(ctx context.Context, a record.Action) error {
	r, err := decodeReship(a)
	if err == nil {
		err = e.Shop.CheckReship(ctx, r)
	}
	if err != nil {
		return fmt.Errorf("check reship: %w", err)
	}
	return nil
}

// Execute reships under key; the shop checks its rules again as it writes.
func (e *ReshipExecutor) Execute(ctx context.Context, key string, a record.Action) (record.Receipt, error) {
	r, err := decodeReship(a)
	if err != nil {
		return record.Receipt{}, fmt.Errorf("reship %s: %w", key, err)
	}
	return e.Shop.Reship(ctx, key, e.By, r)
}

// Lookup asks the shop's register whether the reshipment under key happened.
func (e *ReshipExecutor) Lookup(ctx context.Context, key string) (record.Receipt, bool, error) {
	return lookup(ctx, e.Shop, key, KindReshipment)
}

// Check verifies, without changing anything, that the label is allowed now.
func (e *ReturnLabelExecutor) Check(ctx context.Context, a record.Action) error {
	r, err := decodeReturnLabel(a)
	if err == nil {
		err = e.Shop.CheckReturnLabel(ctx, r)
	}
	if err != nil {
		return fmt.Errorf("check return label: %w", err)
	}
	return nil
}

// Execute issues the label under key; the shop checks its rules again as it writes.
func (e *ReturnLabelExecutor) Execute(ctx context.Context, key string, a record.Action) (record.Receipt, error) {
	r, err := decodeReturnLabel(a)
	if err != nil {
		return record.Receipt{}, fmt.Errorf("return label %s: %w", key, err)
	}
	return e.Shop.CreateReturnLabel(ctx, key, e.By, r)
}

// Lookup asks the shop's register whether the label under key was issued.
func (e *ReturnLabelExecutor) Lookup(ctx context.Context, key string) (record.Receipt, bool, error) {
	return lookup(ctx, e.Shop, key, KindReturnLabel)
}
