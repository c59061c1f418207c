package policy

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
)

const refundSchema = `{
  "type": "object",
  "properties": {
    "order_id":    {"type": "string", "pattern": "^LK-[0-9]+$"},
    "payment_id":  {"type": "string"},
    "amount":      {"type": "number", "exclusiveMinimum": 0, "multipleOf": 0.01},
    "currency":    {"type": "string", "enum": ["CAD", "USD"]},
    "reason_code": {"type": "string"},
    "card":        {"type": "object", "properties": {"number": {"type": "string"}}},
    "items":       {"type": "array", "items": {"type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"]}}
  },
  "required": ["order_id", "payment_id", "amount", "currency", "reason_code"],
  "additionalProperties": false
}`

func refundSpec(t *testing.T, redact ...string) *ActionSpec {
	t.Helper()
	s, err := NewActionSpec("request_refund", []byte(refundSchema), redact)
	if err != nil {
		t.Fatalf("NewActionSpec: %v", err)
	}
	return s
}

func TestActionSpecValidate(t *testing.T) {
	s := refundSpec(t)
	tests := []struct {
		name     string
		args     string
		problems []ArgProblem // nil: valid
	}{
		{"valid", `{"order_id":"LK-507862","payment_id":"PAY-507862-2","amount":119.00,"currency":"CAD","reason_code":"duplicate_charge"}`, nil},
		{"valid integer amount", `{"order_id":"LK-1","payment_id":"P","amount":119,"currency":"CAD","reason_code":"x"}`, nil},
		{"not a whole cent", `{"order_id":"LK-1","payment_id":"P","amount":0.075,"currency":"CAD","reason_code":"x"}`, []ArgProblem{
			{"amount", "must be a multiple of 0.01, got 0.075"},
		}},
		{"cents are exact", `{"order_id":"LK-1","payment_id":"P","amount":0.07,"currency":"CAD","reason_code":"x"}`, nil},
		{"missing fields", `{"order_id":"LK-1","amount":1,"currency":"CAD"}`, []ArgProblem{
			{"payment_id", "is required"}, {"reason_code", "is required"},
		}},
		{"wrong types", `{"order_id":"LK-1","payment_id":7,"amount":"119.00","currency":"CAD","reason_code":"x"}`, []ArgProblem{
			{"amount", "must be number, got string"}, {"payment_id", "must be string, got number"},
		}},
		{"extra field", `{"order_id":"LK-1","payment_id":"P","amount":1,"currency":"CAD","reason_code":"x","note":"hi","bonus":5}`, []ArgProblem{
			{"bonus", "is not allowed"}, {"note", "is not allowed"},
		}},
		{"every problem at once", `{"order_id":"X-1","amount":-3,"currency":"EUR","reason_code":"x","items":[{"sku":"A"},{}]}`, []ArgProblem{
			{"amount", "must be greater than 0, got -3"},
			{"currency", "value must be one of 'CAD', 'USD'"},
			{"items[1].sku", "is required"},
			{"order_id", "'X-1' does not match pattern '^LK-[0-9]+$'"},
			{"payment_id", "is required"},
		}},
		{"duplicate key", `{"order_id":"LK-1","payment_id":"P","amount":1,"amount":500,"currency":"CAD","reason_code":"x"}`, []ArgProblem{
			{"", `duplicate object member name "amount"`},
		}},
		{"array", `[1,2]`, []ArgProblem{{"", "must be a JSON object, got array"}}},
		{"null", `null`, []ArgProblem{{"", "must be a JSON object, got null"}}},
		{"string", `"refund"`, []ArgProblem{{"", "must be a JSON object, got string"}}},
		{"truncated", `{"order_id":`, []ArgProblem{{"", "unexpected end of JSON"}}},
		{"trailing data", `{} {}`, []ArgProblem{{"", "data after the JSON value"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := s.Validate(json.RawMessage(tt.args))
			if tt.problems == nil {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			var ae *ArgsError
			if !errors.As(err, &ae) {
				t.Fatalf("err = %v, want *ArgsError", err)
			}
			if ae.Action != "request_refund" {
				t.Errorf("Action = %q", ae.Action)
			}
			if len(ae.Problems) != len(tt.problems) {
				t.Fatalf("problems = %q, want %q", ae.Problems, tt.problems)
			}
			for i, want := range tt.problems {
				got := ae.Problems[i]
				if got.Path != want.Path || !strings.Contains(got.Reason, want.Reason) {
					t.Errorf("problem %d = %q, want %q", i, got, want)
				}
			}
			if !strings.HasPrefix(err.Error(), "invalid arguments for request_refund: ") {
				t.Errorf("Error() = %q", err)
			}
		})
	}
}

func TestActionSpecWithoutSchema(t *testing.T) {
	s, err := NewActionSpec("note", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args string
		ok   bool
	}{
		{`{"anything":[1,{"x":null}]}`, true},
		{``, true},
		{`{"a":1,"a":1}`, false},
		{`[]`, false},
	}
	for _, tt := range tests {
		t.Run(tt.args, func(t *testing.T) {
			if err := s.Validate(json.RawMessage(tt.args)); (err == nil) != tt.ok {
				t.Errorf("Validate(%s) = %v, want ok=%v", tt.args, err, tt.ok)
			}
		})
	}
}

func TestNewActionSpecRefuses(t *testing.T) {
	tests := []struct {
		name, action, schema string
		redact               []string
		want                 string
	}{
		{"no name", "", `{}`, nil, "action name: must not be empty"},
		{"schema not JSON", "a", `{"type":`, nil, "read schema"},
		{"schema with duplicate keys", "a", `{"type":"object","type":"array"}`, nil, "duplicate"},
		{"schema invalid", "a", `{"type":"thing"}`, nil, "compile schema"},
		{"external reference", "a", `{"$ref":"file:///etc/passwd"}`, nil, "external references are not allowed"},
		{"remote reference", "a", `{"$ref":"https://example.com/s.json"}`, nil, "external references are not allowed"},
		{"empty redact path", "a", `{}`, []string{""}, "redact: empty path"},
		{"empty redact segment", "a", `{}`, []string{"card..number"}, `bad path "card..number"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewActionSpec(tt.action, []byte(tt.schema), tt.redact)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestActionSpecFormatIsAsserted(t *testing.T) {
	s, err := NewActionSpec("a", []byte(`{"type":"object","properties":{"on":{"type":"string","format":"date"}}}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(json.RawMessage(`{"on":"yesterday"}`)); err == nil {
		t.Error(`"yesterday" passed as a date`)
	}
	if err := s.Validate(json.RawMessage(`{"on":"2026-11-29"}`)); err != nil {
		t.Error(err)
	}
}

func TestActionSpecRedacted(t *testing.T) {
	tests := []struct {
		name   string
		redact []string
		args   string
		want   string
	}{
		{"nothing to redact keeps the input", nil, `{"b": 1, "a": 2}`, `{"b": 1, "a": 2}`},
		{"absent field keeps the input", []string{"payment_id"}, `{"b": 1}`, `{"b": 1}`},
		{"empty args", []string{"payment_id"}, ``, `{}`},
		{"top-level key", []string{"payment_id"},
			`{"order_id":"LK-1","payment_id":"PAY-1","amount":119.00}`,
			`{"amount":119.00,"order_id":"LK-1","payment_id":"[redacted]"}`},
		{"dotted path", []string{"card.number"},
			`{"card":{"number":"4111 1111","brand":"visa"},"note":"<ok> & fine"}`,
			`{"card":{"brand":"visa","number":"[redacted]"},"note":"<ok> & fine"}`},
		{"whole object", []string{"card"}, `{"card":{"number":"4111"}}`, `{"card":"[redacted]"}`},
		{"through arrays", []string{"items.serial"},
			`{"items":[{"sku":"A","serial":"S1"},{"sku":"B"},{"sku":"C","serial":"S3"}]}`,
			`{"items":[{"serial":"[redacted]","sku":"A"},{"sku":"B"},{"serial":"[redacted]","sku":"C"}]}`},
		{"big numbers stay exact", []string{"secret"}, `{"n":12345678901234567890,"secret":1}`, `{"n":12345678901234567890,"secret":"[redacted]"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := NewActionSpec("a", nil, tt.redact)
			if err != nil {
				t.Fatal(err)
			}
			in := json.RawMessage(tt.args)
			orig := slices.Clone(in)
			got, err := s.Redacted(in)
			if err != nil {
				t.Fatalf("Redacted: %v", err)
			}
			if string(got) != tt.want {
				t.Errorf("Redacted = %s, want %s", got, tt.want)
			}
			if !slices.Equal(in, orig) {
				t.Errorf("Redacted changed its input: %s", in)
			}
		})
	}
}

func TestActionSpecRedactedRefusesBadArgs(t *testing.T) {
	s := refundSpec(t, "payment_id")
	for _, args := range []string{`{"payment_id":"a","payment_id":"b"}`, `[1]`, `{`} {
		if got, err := s.Redacted(json.RawMessage(args)); err == nil {
			t.Errorf("Redacted(%s) = %s, want an error", args, got)
		}
	}
}
