// Package demo is the practice shop of signoff: orders, payments, refunds,
// reshipments and return labels in their own SQLite file, the executors that
// change it, and a recorded agent that proposes those changes by replaying a
// model transcript.
//
// The shop plays the part of the outside world. It keeps its own register of
// operations keyed by idempotency key, so the engine can ask it whether an
// operation happened, and it enforces its own rules in the same transaction as
// each write, because the world may have changed since an approval was given.
package demo

import (
	"context"
	"crypto/sha256"
	"database/sql"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/signoff-dev/signoff/fixtures"
	"github.com/signoff-dev/signoff/workflow"
)

//go:embed schema.sql
var schemaSQL string

//go:embed seed.sql
var seedSQL string

// shopSchemaVersion is stored in PRAGMA user_version; a shop file written by a
// newer build is refused rather than guessed at.
const shopSchemaVersion = 1

// timeLayout stores times as sortable UTC text with millisecond precision.
const timeLayout = "2006-01-02T15:04:05.000Z07:00"

// The kinds of change the shop makes, as they appear in Change.Kind.
const (
	KindRefund      = "refund"
	KindReshipment  = "reshipment"
	KindReturnLabel = "return_label"
)

// Shop is the practice shop over a SQLite database that its caller opened
// (storage/sqlite.OpenDB) and closes.
type Shop struct {
	db    *sql.DB
	clock workflow.Clock
}

// OpenShopReadOnly reads a shop that OpenShop made, on a database opened
// read-only: it creates, seeds and writes nothing, and refuses a file that
// holds no shop or one from another build.
func OpenShopReadOnly(ctx context.Context, db *sql.DB) (*Shop, error) {
	var version int
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return nil, fmt.Errorf("open shop: read schema version: %w", err)
	}
	if version != shopSchemaVersion {
		return nil, fmt.Errorf("open shop: schema version %d, this build reads %d (a command that writes sets the shop up)", version, shopSchemaVersion)
	}
	return &Shop{db: db, clock: workflow.SystemClock{}}, nil
}

// OpenShop creates the shop's tables in db if they are missing and seeds the
// demo data when the shop has no orders. clock stamps every change; nil means
// workflow.SystemClock.
func OpenShop(ctx context.Context, db *sql.DB, clock workflow.Clock) (*Shop, error) {
	if clock == nil {
		clock = workflow.SystemClock{}
	}
	s := &Shop{db: db, clock: clock}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("open shop: %w", err)
	}
	defer func() { _ = tx.Rollback() }() // a no-op after Commit
	var version int
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return nil, fmt.Errorf("open shop: read schema version: %w", err)
	}
	if version > shopSchemaVersion {
		return nil, fmt.Errorf("open shop: schema version %d is newer than this build (%d)", version, shopSchemaVersion)
	}
	if _, err := tx.ExecContext(ctx, schemaSQL); err != nil {
		return nil, fmt.Errorf("open shop: create schema: %w", err)
	}
	var orders int
	if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM orders").Scan(&orders); err != nil {
		return nil, fmt.Errorf("open shop: count orders: %w", err)
	}
	if orders == 0 {
		if err := seed(ctx, tx); err != nil {
			return nil, fmt.Errorf("open shop: seed: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, "PRAGMA user_version = "+strconv.Itoa(shopSchemaVersion)); err != nil {
		return nil, fmt.Errorf("open shop: write schema version: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("open shop: commit: %w", err)
	}
	return s, nil
}

// seed loads the orders and payments, and the tickets of the recorded
// transcripts, so the help desk knows the tickets the agent will work on.
func seed(ctx context.Context, tx *sql.Tx) error {
	if _, err := tx.ExecContext(ctx, seedSQL); err != nil {
		return err
	}
	for _, id := range fixtures.TranscriptTickets() {
		tr, err := loadTranscript(id)
		if err != nil {
			return err
		}
		t := tr.Ticket
		if _, err := tx.ExecContext(ctx,
			"INSERT INTO tickets (id, order_id, customer, subject, body) VALUES (?, ?, ?, ?, ?)",
			t.ID, t.OrderID, t.Customer, t.Subject, t.Body); err != nil {
			return fmt.Errorf("ticket %s: %w", t.ID, err)
		}
	}
	return nil
}

// RefusedError is the shop refusing an operation under one of its rules.
// Nothing changed, and asking again with the same arguments will be refused
// again, so it is permanent.
type RefusedError struct {
	Rule string // a short stable name, such as "payment-not-captured"
	Msg  string
}

func (e *RefusedError) Error() string { return e.Msg + " (shop rule " + e.Rule + ")" }

// Permanent reports that the refusal does not go away by retrying.
func (e *RefusedError) Permanent() bool { return true }

func refused(rule, format string, args ...any) error {
	return &RefusedError{Rule: rule, Msg: fmt.Sprintf(format, args...)}
}

// TransientError says that the shop certainly did nothing (its transaction
// did not commit) and that a retry may succeed.
type TransientError struct {
	Err error
}

func (e *TransientError) Error() string { return e.Err.Error() }

// Unwrap returns the underlying error.
func (e *TransientError) Unwrap() error { return e.Err }

// Transient reports that a retry may succeed.
func (e *TransientError) Transient() bool { return true }

// RefundRequest is the argument of request_refund.
type RefundRequest struct {
	OrderID    string  `json:"order_id"`
	PaymentID  string  `json:"payment_id"`
	Amount     float64 `json:"amount"`
	Currency   string  `json:"currency"`
	ReasonCode string  `json:"reason_code"`
}

// ReshipRequest is the argument of reship_item.
type ReshipRequest struct {
	OrderID  string `json:"order_id"`
	SKU      string `json:"sku"`
	Quantity int    `json:"quantity"`
}

// ReturnLabelRequest is the argument of create_return_label.
type ReturnLabelRequest struct {
	OrderID      string `json:"order_id"`
	SKU          string `json:"sku"`
	Reason       string `json:"reason"`
	FreeShipping bool   `json:"free_shipping"`
}

// Change is one change the shop made, as `signoff shop changes` lists it.
type Change struct {
	Kind      string    `json:"kind"` // refund, reshipment, return_label
	ID        string    `json:"id"`   // the receipt id: RF-…, RS-…, RL-…
	OrderID   string    `json:"order_id"`
	PaymentID string    `json:"payment_id,omitempty"`
	SKU       string    `json:"sku,omitempty"`
	Quantity  int       `json:"quantity,omitempty"`
	Amount    string    `json:"amount,omitempty"` // decimal, "119.00"
	Currency  string    `json:"currency,omitempty"`
	Key       string    `json:"idempotency_key"`
	By        string    `json:"by"`
	At        time.Time `json:"at"`
}

// Order is an order as the shop shows it.
type Order struct {
	ID       string      `json:"id"`
	Customer string      `json:"customer"`
	Status   string      `json:"status"`
	Currency string      `json:"currency"`
	Total    string      `json:"total"`
	PlacedAt time.Time   `json:"placed_at"`
	Items    []OrderItem `json:"items"`
}

// OrderItem is one line of an order.
type OrderItem struct {
	SKU         string `json:"sku"`
	Description string `json:"description"`
	Quantity    int    `json:"quantity"`
	UnitPrice   string `json:"unit_price"`
}

// Payment is a charge on an order. Amounts are decimal strings.
type Payment struct {
	ID        string    `json:"id"`
	OrderID   string    `json:"order_id"`
	Amount    string    `json:"amount"`
	Currency  string    `json:"currency"`
	Status    string    `json:"status"` // authorized, captured, refunded
	Refunded  string    `json:"refunded"`
	Remaining string    `json:"remaining"` // what may still be refunded
	CreatedAt time.Time `json:"created_at"`
}

// Ticket is a customer's message to the help desk.
type Ticket struct {
	ID       string `json:"id"`
	OrderID  string `json:"order_id"`
	Customer string `json:"customer"`
	Subject  string `json:"subject"`
	Body     string `json:"body"`
}

// queryer is what both *sql.DB and *sql.Tx offer, so that a read-only check
// and the check inside a write run the same code.
type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// refund is a validated RefundRequest.
type refund struct {
	orderID, paymentID, currency, reason string
	cents                                int64
}

// validRefund checks the shape of r; the rules that depend on the shop's data
// come later, against the data.
func validRefund(r RefundRequest) (refund, error) {
	cents, err := CentsFromFloat(r.Amount)
	if err != nil {
		return refund{}, refused("invalid-amount", "%v", err)
	}
	return validRefundCents(r.OrderID, r.PaymentID, r.Currency, r.ReasonCode, cents)
}

func validRefundCents(orderID, paymentID, currency, reason string, cents int64) (refund, error) {
	switch {
	case orderID == "":
		return refund{}, refused("invalid-args", "refund: order_id is empty")
	case paymentID == "":
		return refund{}, refused("invalid-args", "refund: payment_id is empty")
	case !isCurrency(currency):
		return refund{}, refused("invalid-args", "refund: currency %q is not a three-letter code like CAD", currency)
	case reason == "":
		return refund{}, refused("invalid-args", "refund: reason_code is empty")
	}
	return refund{orderID: orderID, paymentID: paymentID, currency: currency, reason: reason, cents: cents}, nil
}

func isCurrency(c string) bool {
	if len(c) != 3 {
		return false
	}
	for i := 0; i < 3; i++ {
		if c[i] < 'A' || c[i] > 'Z' {
			return false
		}
	}
	return true
}

func (r refund) digest() string {
	return digest(KindRefund, r.orderID, r.paymentID, strconv.FormatInt(r.cents, 10), r.currency, r.reason)
}

type payment struct {
	id, orderID, currency, status string
	amount, refunded              int64
	created                       string
}

// checkRefund applies the refund rules to the shop's current data.
func checkRefund(ctx context.Context, q queryer, r refund) (payment, error) {
	if err := orderExists(ctx, q, r.orderID); err != nil {
		return payment{}, err
	}
	var p payment
	err := q.QueryRowContext(ctx,
		`SELECT id, order_id, currency, status, amount_cents, refunded_cents, created_at FROM payments WHERE id = ?`,
		r.paymentID).Scan(&p.id, &p.orderID, &p.currency, &p.status, &p.amount, &p.refunded, &p.created)
	if errors.Is(err, sql.ErrNoRows) {
		return payment{}, refused("payment-not-found", "there is no payment %s", r.paymentID)
	}
	if err != nil {
		return payment{}, fmt.Errorf("read payment %s: %w", r.paymentID, err)
	}
	switch {
	case p.orderID != r.orderID:
		return payment{}, refused("payment-not-of-order", "%s is a charge of %s, not of %s", p.id, p.orderID, r.orderID)
	case p.status != "captured":
		return payment{}, refused("payment-not-captured", "%s is not a captured charge of %s (it is %s)", p.id, r.orderID, p.status)
	case p.currency != r.currency:
		return payment{}, refused("currency-mismatch", "%s was charged in %s, not %s", p.id, p.currency, r.currency)
	case r.cents > p.amount-p.refunded:
		return payment{}, refused("exceeds-remaining", "a refund of %s %s is more than the %s %s left to refund on %s",
			FormatCents(r.cents), r.currency, FormatCents(p.amount-p.refunded), p.currency, p.id)
	}
	return p, nil
}

func orderExists(ctx context.Context, q queryer, orderID string) error {
	var one int
	err := q.QueryRowContext(ctx, "SELECT 1 FROM orders WHERE id = ?", orderID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return refused("order-not-found", "there is no order %s", orderID)
	}
	if err != nil {
		return fmt.Errorf("read order %s: %w", orderID, err)
	}
	return nil
}

// orderedQuantity returns how many of sku the order holds, refusing a sku that
// is not on the order.
func orderedQuantity(ctx context.Context, q queryer, orderID, sku string) (int, error) {
	if err := orderExists(ctx, q, orderID); err != nil {
		return 0, err
	}
	var n int
	err := q.QueryRowContext(ctx, "SELECT quantity FROM order_items WHERE order_id = ? AND sku = ?", orderID, sku).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, refused("sku-not-on-order", "%s is not on order %s", sku, orderID)
	}
	if err != nil {
		return 0, fmt.Errorf("read item %s of %s: %w", sku, orderID, err)
	}
	return n, nil
}

func validReship(r ReshipRequest) error {
	switch {
	case r.OrderID == "":
		return refused("invalid-args", "reship: order_id is empty")
	case r.SKU == "":
		return refused("invalid-args", "reship: sku is empty")
	case r.Quantity < 1:
		return refused("invalid-args", "reship: quantity %d is not at least 1", r.Quantity)
	}
	return nil
}

// checkReship allows reshipping only items of the order, and never more of a
// sku in total than the order holds, so two reshipments cannot together send
// more than was bought.
func checkReship(ctx context.Context, q queryer, r ReshipRequest) error {
	ordered, err := orderedQuantity(ctx, q, r.OrderID, r.SKU)
	if err != nil {
		return err
	}
	var already int
	if err := q.QueryRowContext(ctx,
		"SELECT COALESCE(SUM(quantity), 0) FROM reshipments WHERE order_id = ? AND sku = ?",
		r.OrderID, r.SKU).Scan(&already); err != nil {
		return fmt.Errorf("read reshipments of %s: %w", r.OrderID, err)
	}
	if r.Quantity+already > ordered {
		return refused("exceeds-ordered", "reshipping %d %s is more than the order holds (%d ordered, %d reshipped already)",
			r.Quantity, r.SKU, ordered, already)
	}
	return nil
}

func validReturnLabel(r ReturnLabelRequest) error {
	switch {
	case r.OrderID == "":
		return refused("invalid-args", "return label: order_id is empty")
	case r.SKU == "":
		return refused("invalid-args", "return label: sku is empty")
	case r.Reason == "":
		return refused("invalid-args", "return label: reason is empty")
	}
	return nil
}

func checkReturnLabel(ctx context.Context, q queryer, r ReturnLabelRequest) error {
	_, err := orderedQuantity(ctx, q, r.OrderID, r.SKU)
	return err
}

// CheckRefund applies the refund rules without changing anything.
func (s *Shop) CheckRefund(ctx context.Context, r RefundRequest) error {
	v, err := validRefund(r)
	if err != nil {
		return err
	}
	_, err = checkRefund(ctx, s.db, v)
	return err
}

// CheckReship applies the reshipment rules without changing anything.
func (s *Shop) CheckReship(ctx context.Context, r ReshipRequest) error {
	if err := validReship(r); err != nil {
		return err
	}
	return checkReship(ctx, s.db, r)
}

// CheckReturnLabel applies the return label rules without changing anything.
func (s *Shop) CheckReturnLabel(ctx context.Context, r ReturnLabelRequest) error {
	if err := validReturnLabel(r); err != nil {
		return err
	}
	return checkReturnLabel(ctx, s.db, r)
}

// Refund refunds part or all of a captured charge under the idempotency key.
// The same key with the same arguments returns the first receipt and changes
// nothing; with other arguments it is refused.
func (s *Shop) Refund(ctx context.Context, key, by string, r RefundRequest) (record.Receipt, error) {
	v, err := validRefund(r)
	if err != nil {
		return record.Receipt{}, fmt.Errorf("refund %s: %w", key, err)
	}
	var rc record.Receipt
	err = s.write(ctx, func(tx *sql.Tx) error {
		var err error
		rc, _, err = s.refund(ctx, tx, key, by, v)
		return err
	})
	if err != nil {
		return record.Receipt{}, fmt.Errorf("refund %s: %w", key, err)
	}
	return rc, nil
}

// ManualRefund is a refund made by hand, outside any run: it takes the next
// key manual-<n> and the payment's own currency. amount is decimal ("119.00").
func (s *Shop) ManualRefund(ctx context.Context, orderID, paymentID, amount, by string) (Change, error) {
	op := fmt.Sprintf("manual refund of %s", paymentID)
	if by == "" {
		return Change{}, fmt.Errorf("%s: %w", op, refused("invalid-args", "say who makes it (by)"))
	}
	cents, err := ParseAmount(amount)
	if err != nil {
		return Change{}, fmt.Errorf("%s: %w", op, refused("invalid-amount", "%v", err))
	}
	var ch Change
	err = s.write(ctx, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM operations WHERE key LIKE 'manual-%'").Scan(&n); err != nil {
			return fmt.Errorf("count manual changes: %w", err)
		}
		key := fmt.Sprintf("manual-%d", n+1)
		var currency string
		err := tx.QueryRowContext(ctx, "SELECT currency FROM payments WHERE id = ?", paymentID).Scan(&currency)
		if errors.Is(err, sql.ErrNoRows) {
			return refused("payment-not-found", "there is no payment %s", paymentID)
		}
		if err != nil {
			return fmt.Errorf("read payment %s: %w", paymentID, err)
		}
		v, err := validRefundCents(orderID, paymentID, currency, "RFD-MANUAL", cents)
		if err != nil {
			return err
		}
		_, ch, err = s.refund(ctx, tx, key, by, v)
		return err
	})
	if err != nil {
		return Change{}, fmt.Errorf("%s: %w", op, err)
	}
	return ch, nil
}

func (s *Shop) refund(ctx context.Context, tx *sql.Tx, key, by string, r refund) (record.Receipt, Change, error) {
	dg := r.digest()
	if rc, ch, found, err := s.replay(ctx, tx, key, KindRefund, dg); found || err != nil {
		return rc, ch, err
	}
	p, err := checkRefund(ctx, tx, r)
	if err != nil {
		return record.Receipt{}, Change{}, err
	}
	id := receiptID("RF", key)
	left := p.amount - p.refunded - r.cents
	status := p.status
	if left == 0 {
		status = "refunded"
	}
	// The WHERE clause restates the rules, so even a bug above cannot refund
	// more than was captured.
	res, err := tx.ExecContext(ctx,
		`UPDATE payments SET refunded_cents = refunded_cents + ?, status = ?
		 WHERE id = ? AND status = 'captured' AND refunded_cents + ? <= amount_cents`,
		r.cents, status, p.id, r.cents)
	if err != nil {
		return record.Receipt{}, Change{}, fmt.Errorf("update payment %s: %w", p.id, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return record.Receipt{}, Change{}, fmt.Errorf("update payment %s: %d rows changed (%v)", p.id, n, err)
	}
	detail := map[string]any{
		"refund_id":      id,
		"order_id":       r.orderID,
		"payment_id":     r.paymentID,
		"amount":         FormatCents(r.cents),
		"currency":       r.currency,
		"reason_code":    r.reason,
		"payment_status": status,
		"remaining":      FormatCents(left),
	}
	ch := Change{Kind: KindRefund, ID: id, OrderID: r.orderID, PaymentID: r.paymentID,
		Amount: FormatCents(r.cents), Currency: r.currency, Key: key, By: by}
	rc, ch, err := s.register(ctx, tx, ch, r.cents, dg, detail)
	if err != nil {
		return record.Receipt{}, Change{}, err
	}
	if _, err := tx.ExecContext(ctx,
		`INSERT INTO refunds (id, op_key, order_id, payment_id, amount_cents, currency, reason_code, at)
		 VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		id, key, r.orderID, r.paymentID, r.cents, r.currency, r.reason, formatTime(ch.At)); err != nil {
		return record.Receipt{}, Change{}, fmt.Errorf("insert refund: %w", err)
	}
	return rc, ch, nil
}

// Reship sends quantity more of an item of the order under the idempotency key.
func (s *Shop) Reship(ctx context.Context, key, by string, r ReshipRequest) (record.Receipt, error) {
	if err := validReship(r); err != nil {
		return record.Receipt{}, fmt.Errorf("reship %s: %w", key, err)
	}
	dg := digest(KindReshipment, r.OrderID, r.SKU, strconv.Itoa(r.Quantity))
	var rc record.Receipt
	err := s.write(ctx, func(tx *sql.Tx) error {
		var found bool
		var err error
		if rc, _, found, err = s.replay(ctx, tx, key, KindReshipment, dg); found || err != nil {
			return err
		}
		if err := checkReship(ctx, tx, r); err != nil {
			return err
		}
		id := receiptID("RS", key)
		detail := map[string]any{"reshipment_id": id, "order_id": r.OrderID, "sku": r.SKU, "quantity": r.Quantity}
		ch := Change{Kind: KindReshipment, ID: id, OrderID: r.OrderID, SKU: r.SKU, Quantity: r.Quantity, Key: key, By: by}
		if rc, ch, err = s.register(ctx, tx, ch, 0, dg, detail); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx,
			"INSERT INTO reshipments (id, op_key, order_id, sku, quantity, at) VALUES (?, ?, ?, ?, ?, ?)",
			id, key, r.OrderID, r.SKU, r.Quantity, formatTime(ch.At)); err != nil {
			return fmt.Errorf("insert reshipment: %w", err)
		}
		return nil
	})
	if err != nil {
		return record.Receipt{}, fmt.Errorf("reship %s: %w", key, err)
	}
	return rc, nil
}

// CreateReturnLabel issues a return label for an item of the order under the
// idempotency key.
func (s *Shop) CreateReturnLabel(ctx context.Context, key, by string, r ReturnLabelRequest) (record.Receipt, error) {
	if err := validReturnLabel(r); err != nil {
		return record.Receipt{}, fmt.Errorf("return label %s: %w", key, err)
	}
	dg := digest(KindReturnLabel, r.OrderID, r.SKU, r.Reason, strconv.FormatBool(r.FreeShipping))
	var rc record.Receipt
	err := s.write(ctx, func(tx *sql.Tx) error {
		var found bool
		var err error
		if rc, _, found, err = s.replay(ctx, tx, key, KindReturnLabel, dg); found || err != nil {
			return err
		}
		if err := checkReturnLabel(ctx, tx, r); err != nil {
			return err
		}
		id := receiptID("RL", key)
		detail := map[string]any{"label_id": id, "order_id": r.OrderID, "sku": r.SKU, "reason": r.Reason, "free_shipping": r.FreeShipping}
		ch := Change{Kind: KindReturnLabel, ID: id, OrderID: r.OrderID, SKU: r.SKU, Key: key, By: by}
		if rc, ch, err = s.register(ctx, tx, ch, 0, dg, detail); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx,
			"INSERT INTO return_labels (id, op_key, order_id, sku, reason, free_shipping, at) VALUES (?, ?, ?, ?, ?, ?, ?)",
			id, key, r.OrderID, r.SKU, r.Reason, r.FreeShipping, formatTime(ch.At)); err != nil {
			return fmt.Errorf("insert return label: %w", err)
		}
		return nil
	})
	if err != nil {
		return record.Receipt{}, fmt.Errorf("return label %s: %w", key, err)
	}
	return rc, nil
}

// write runs fn in one transaction. A refusal or any failure before the
// commit leaves the shop as it was, so those are reported as refused or
// transient; a failed commit is reported as it is, because then nobody can say
// whether the change happened.
func (s *Shop) write(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return &TransientError{Err: fmt.Errorf("begin: %w", err)}
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback() // uncommitted work is discarded even if this fails
		var r *RefusedError
		if errors.As(err, &r) {
			return err
		}
		return &TransientError{Err: err}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// replay looks key up in the register: found with the same arguments, it
// returns the first receipt; found with other arguments, the key is being
// reused and the operation is refused.
func (s *Shop) replay(ctx context.Context, tx *sql.Tx, key, kind, dg string) (record.Receipt, Change, bool, error) {
	op, found, err := s.operation(ctx, tx, key)
	if err != nil || !found {
		return record.Receipt{}, Change{}, false, err
	}
	if op.kind != kind || op.digest != dg {
		return record.Receipt{}, Change{}, false, refused("key-reused",
			"idempotency key %s was already used for a different %s (%s)", key, strings.ReplaceAll(op.kind, "_", " "), op.change.ID)
	}
	return op.receipt, op.change, true, nil
}

// register records the operation under its key, stamped now.
func (s *Shop) register(ctx context.Context, tx *sql.Tx, ch Change, cents int64, dg string, detail map[string]any) (record.Receipt, Change, error) {
	d, err := json.Marshal(detail)
	if err != nil {
		return record.Receipt{}, Change{}, fmt.Errorf("encode receipt: %w", err)
	}
	rc := record.Receipt{ID: ch.ID, Detail: d}
	stored, err := json.Marshal(rc)
	if err != nil {
		return record.Receipt{}, Change{}, fmt.Errorf("encode receipt: %w", err)
	}
	ch.At = s.clock.Now().UTC().Truncate(time.Millisecond)
	_, err = tx.ExecContext(ctx,
		`INSERT INTO operations (key, kind, order_id, payment_id, amount_cents, currency, sku, quantity,
		                         receipt_id, receipt, args_digest, by, at)
		 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		ch.Key, ch.Kind, ch.OrderID, ch.PaymentID, cents, ch.Currency, ch.SKU, ch.Quantity,
		ch.ID, string(stored), dg, ch.By, formatTime(ch.At))
	if err != nil {
		return record.Receipt{}, Change{}, fmt.Errorf("register operation %s: %w", ch.Key, err)
	}
	return rc, ch, nil
}

type operation struct {
	kind, digest string
	receipt      record.Receipt
	change       Change
}

const operationColumns = `kind, receipt_id, order_id, payment_id, sku, quantity, amount_cents, currency, key, by, at, receipt, args_digest`

type scanner interface{ Scan(dest ...any) error }

func scanOperation(row scanner) (operation, error) {
	var (
		op      operation
		cents   int64
		at      string
		receipt string
	)
	ch := &op.change
	if err := row.Scan(&ch.Kind, &ch.ID, &ch.OrderID, &ch.PaymentID, &ch.SKU, &ch.Quantity, &cents,
		&ch.Currency, &ch.Key, &ch.By, &at, &receipt, &op.digest); err != nil {
		return operation{}, err
	}
	op.kind = ch.Kind
	if cents > 0 {
		ch.Amount = FormatCents(cents)
	}
	t, err := time.Parse(timeLayout, at)
	if err != nil {
		return operation{}, fmt.Errorf("operation %s: time %q: %w", ch.Key, at, err)
	}
	ch.At = t
	if err := json.Unmarshal([]byte(receipt), &op.receipt); err != nil {
		return operation{}, fmt.Errorf("operation %s: receipt: %w", ch.Key, err)
	}
	return op, nil
}

func (s *Shop) operation(ctx context.Context, q queryer, key string) (operation, bool, error) {
	op, err := scanOperation(q.QueryRowContext(ctx, "SELECT "+operationColumns+" FROM operations WHERE key = ?", key))
	if errors.Is(err, sql.ErrNoRows) {
		return operation{}, false, nil
	}
	if err != nil {
		return operation{}, false, fmt.Errorf("read operation %s: %w", key, err)
	}
	return op, true, nil
}

// Lookup tells whether an operation with key happened, from the register:
// (receipt, true) when it did, (zero, false, nil) when it did not.
func (s *Shop) Lookup(ctx context.Context, key string) (record.Receipt, bool, error) {
	op, found, err := s.operation(ctx, s.db, key)
	if err != nil {
		return record.Receipt{}, false, fmt.Errorf("lookup %s: %w", key, err)
	}
	return op.receipt, found, nil
}

// lookupKind is Lookup that also says which kind of change the key made.
func (s *Shop) lookupKind(ctx context.Context, key string) (record.Receipt, string, bool, error) {
	op, found, err := s.operation(ctx, s.db, key)
	if err != nil {
		return record.Receipt{}, "", false, fmt.Errorf("lookup %s: %w", key, err)
	}
	return op.receipt, op.kind, found, nil
}

// Changes lists every change the shop made, oldest first.
func (s *Shop) Changes(ctx context.Context) ([]Change, error) {
	// rowid is the insertion order; the register is never deleted from.
	rows, err := s.db.QueryContext(ctx, "SELECT "+operationColumns+" FROM operations ORDER BY rowid")
	if err != nil {
		return nil, fmt.Errorf("list changes: %w", err)
	}
	defer rows.Close()
	var out []Change
	for rows.Next() {
		op, err := scanOperation(rows)
		if err != nil {
			return nil, fmt.Errorf("list changes: %w", err)
		}
		out = append(out, op.change)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list changes: %w", err)
	}
	return out, nil
}

// Order returns an order with its items. An unknown order wraps
// storage.ErrNotFound.
func (s *Shop) Order(ctx context.Context, id string) (Order, error) {
	o := Order{ID: id}
	var placed string
	err := s.db.QueryRowContext(ctx, "SELECT customer, status, currency, placed_at FROM orders WHERE id = ?", id).
		Scan(&o.Customer, &o.Status, &o.Currency, &placed)
	if errors.Is(err, sql.ErrNoRows) {
		return Order{}, fmt.Errorf("order %s: %w", id, storage.ErrNotFound)
	}
	if err != nil {
		return Order{}, fmt.Errorf("order %s: %w", id, err)
	}
	if o.PlacedAt, err = time.Parse(timeLayout, placed); err != nil {
		return Order{}, fmt.Errorf("order %s: placed_at %q: %w", id, placed, err)
	}
	rows, err := s.db.QueryContext(ctx,
		"SELECT sku, description, quantity, unit_cents FROM order_items WHERE order_id = ? ORDER BY sku", id)
	if err != nil {
		return Order{}, fmt.Errorf("order %s: items: %w", id, err)
	}
	defer rows.Close()
	var total int64
	o.Items = []OrderItem{}
	for rows.Next() {
		var it OrderItem
		var unit int64
		if err := rows.Scan(&it.SKU, &it.Description, &it.Quantity, &unit); err != nil {
			return Order{}, fmt.Errorf("order %s: items: %w", id, err)
		}
		it.UnitPrice = FormatCents(unit)
		total += unit * int64(it.Quantity)
		o.Items = append(o.Items, it)
	}
	if err := rows.Err(); err != nil {
		return Order{}, fmt.Errorf("order %s: items: %w", id, err)
	}
	o.Total = FormatCents(total)
	return o, nil
}

// OrderWithPayments is an order and its charges, as `signoff shop orders` lists them.
type OrderWithPayments struct {
	Order
	Payments []Payment `json:"payments"`
}

// Orders lists every order of the shop with its charges, by id.
func (s *Shop) Orders(ctx context.Context) ([]OrderWithPayments, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT id FROM orders ORDER BY id")
	if err != nil {
		return nil, fmt.Errorf("list orders: %w", err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, fmt.Errorf("list orders: %w", err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list orders: %w", err)
	}
	out := []OrderWithPayments{}
	for _, id := range ids {
		o, err := s.Order(ctx, id)
		if err != nil {
			return nil, err
		}
		p, err := s.Payments(ctx, id)
		if err != nil {
			return nil, err
		}
		out = append(out, OrderWithPayments{Order: o, Payments: p})
	}
	return out, nil
}

// Payments lists the charges of an order, oldest first. An unknown order
// wraps storage.ErrNotFound.
func (s *Shop) Payments(ctx context.Context, orderID string) ([]Payment, error) {
	if err := orderExists(ctx, s.db, orderID); err != nil {
		var r *RefusedError
		if errors.As(err, &r) {
			return nil, fmt.Errorf("payments of %s: %w", orderID, storage.ErrNotFound)
		}
		return nil, fmt.Errorf("payments of %s: %w", orderID, err)
	}
	rows, err := s.db.QueryContext(ctx,
		`SELECT id, order_id, currency, status, amount_cents, refunded_cents, created_at
		 FROM payments WHERE order_id = ? ORDER BY created_at, id`, orderID)
	if err != nil {
		return nil, fmt.Errorf("payments of %s: %w", orderID, err)
	}
	defer rows.Close()
	out := []Payment{}
	for rows.Next() {
		var p payment
		if err := rows.Scan(&p.id, &p.orderID, &p.currency, &p.status, &p.amount, &p.refunded, &p.created); err != nil {
			return nil, fmt.Errorf("payments of %s: %w", orderID, err)
		}
		created, err := time.Parse(timeLayout, p.created)
		if err != nil {
			return nil, fmt.Errorf("payments of %s: created_at %q: %w", orderID, p.created, err)
		}
		remaining := int64(0)
		if p.status == "captured" {
			remaining = p.amount - p.refunded
		}
		out = append(out, Payment{ID: p.id, OrderID: p.orderID, Amount: FormatCents(p.amount), Currency: p.currency,
			Status: p.status, Refunded: FormatCents(p.refunded), Remaining: FormatCents(remaining), CreatedAt: created})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("payments of %s: %w", orderID, err)
	}
	return out, nil
}

// Ticket returns a help desk ticket. An unknown ticket wraps storage.ErrNotFound.
func (s *Shop) Ticket(ctx context.Context, id string) (Ticket, error) {
	t := Ticket{ID: id}
	err := s.db.QueryRowContext(ctx, "SELECT order_id, customer, subject, body FROM tickets WHERE id = ?", id).
		Scan(&t.OrderID, &t.Customer, &t.Subject, &t.Body)
	if errors.Is(err, sql.ErrNoRows) {
		return Ticket{}, fmt.Errorf("ticket %s: %w", id, storage.ErrNotFound)
	}
	if err != nil {
		return Ticket{}, fmt.Errorf("ticket %s: %w", id, err)
	}
	return t, nil
}

// ModelCalls counts the model calls recorded for a run: the provider's view,
// independent of what the run's own state claims.
func (s *Shop) ModelCalls(ctx context.Context, runID string) (int, error) {
	var n int
	if err := s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM model_calls WHERE run_id = ?", runID).Scan(&n); err != nil {
		return 0, fmt.Errorf("model calls of %s: %w", runID, err)
	}
	return n, nil
}

// Usage is what the model-call ledger says a run cost.
type Usage struct {
	Calls     int `json:"calls"`
	TokensIn  int `json:"tokens_in"`
	TokensOut int `json:"tokens_out"`
}

// ModelUsage sums the model calls recorded for a run.
func (s *Shop) ModelUsage(ctx context.Context, runID string) (Usage, error) {
	var u Usage
	if err := s.db.QueryRowContext(ctx,
		"SELECT COUNT(*), COALESCE(SUM(tokens_in), 0), COALESCE(SUM(tokens_out), 0) FROM model_calls WHERE run_id = ?",
		runID).Scan(&u.Calls, &u.TokensIn, &u.TokensOut); err != nil {
		return Usage{}, fmt.Errorf("model usage of %s: %w", runID, err)
	}
	return u, nil
}

// recordModelCall appends to the provider's usage log. It is the only write a
// step makes, and it models a cost the provider charges, not a change of the
// shop.
func (s *Shop) recordModelCall(ctx context.Context, runID, ticket string, index, tokensIn, tokensOut int) error {
	_, err := s.db.ExecContext(ctx,
		"INSERT INTO model_calls (run_id, ticket, call_index, tokens_in, tokens_out, at) VALUES (?, ?, ?, ?, ?, ?)",
		runID, ticket, index, tokensIn, tokensOut, formatTime(s.clock.Now()))
	if err != nil {
		return fmt.Errorf("record model call %d of %s: %w", index, runID, err)
	}
	return nil
}

// digest is a length-prefixed SHA-256 of the normalised arguments, so that
// 119 and 119.00 are the same refund and no two argument lists collide.
func digest(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(strconv.Itoa(len(p))))
		h.Write([]byte{':'})
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// receiptID derives the receipt id from the key, so a receipt is the same
// however many times the key is presented.
func receiptID(prefix, key string) string {
	sum := sha256.Sum256([]byte("signoff-shop:" + key))
	return prefix + "-" + strings.ToUpper(hex.EncodeToString(sum[:5]))
}

func formatTime(t time.Time) string { return t.UTC().Format(timeLayout) }
