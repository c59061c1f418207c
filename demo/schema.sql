-- The practice shop. Every statement is idempotent so that opening an existing
-- file is harmless; the seed is loaded separately, only into an empty shop.

CREATE TABLE IF NOT EXISTS orders (
    id         TEXT PRIMARY KEY,
    customer   TEXT NOT NULL,
    email      TEXT NOT NULL,
    status     TEXT NOT NULL,
    currency   TEXT NOT NULL,
    placed_at  TEXT NOT NULL
);

CREATE TABLE IF NOT EXISTS order_items (
    order_id    TEXT    NOT NULL REFERENCES orders(id),
    sku         TEXT    NOT NULL,
    description TEXT    NOT NULL,
    quantity    INTEGER NOT NULL CHECK (quantity > 0),
    unit_cents  INTEGER NOT NULL CHECK (unit_cents >= 0),
    PRIMARY KEY (order_id, sku)
);

CREATE TABLE IF NOT EXISTS payments (
    id             TEXT    PRIMARY KEY,
    order_id       TEXT    NOT NULL REFERENCES orders(id),
    amount_cents   INTEGER NOT NULL CHECK (amount_cents > 0),
    currency       TEXT    NOT NULL,
    status         TEXT    NOT NULL CHECK (status IN ('authorized', 'captured', 'refunded')),
    refunded_cents INTEGER NOT NULL DEFAULT 0,
    created_at     TEXT    NOT NULL,
    CHECK (refunded_cents >= 0 AND refunded_cents <= amount_cents)
);

CREATE INDEX IF NOT EXISTS payments_order ON payments (order_id);

-- The register: one row per operation, keyed by the caller's idempotency key.
-- It is what the engine asks (Lookup) when it cannot prove an operation happened.
CREATE TABLE IF NOT EXISTS operations (
    key          TEXT    PRIMARY KEY,
    kind         TEXT    NOT NULL CHECK (kind IN ('refund', 'reshipment', 'return_label')),
    order_id     TEXT    NOT NULL,
    payment_id   TEXT    NOT NULL DEFAULT '',
    amount_cents INTEGER NOT NULL DEFAULT 0,
    currency     TEXT    NOT NULL DEFAULT '',
    sku          TEXT    NOT NULL DEFAULT '',
    quantity     INTEGER NOT NULL DEFAULT 0,
    receipt_id   TEXT    NOT NULL UNIQUE,
    receipt      TEXT    NOT NULL,
    args_digest  TEXT    NOT NULL,
    by           TEXT    NOT NULL,
    at           TEXT    NOT NULL
);

CREATE TABLE IF NOT EXISTS refunds (
    id           TEXT    PRIMARY KEY,
    op_key       TEXT    NOT NULL UNIQUE REFERENCES operations(key),
    order_id     TEXT    NOT NULL REFERENCES orders(id),
    payment_id   TEXT    NOT NULL REFERENCES payments(id),
    amount_cents INTEGER NOT NULL CHECK (amount_cents > 0),
    currency     TEXT    NOT NULL,
    reason_code  TEXT    NOT NULL,
    at           TEXT    NOT NULL
);

CREATE TABLE IF NOT EXISTS reshipments (
    id       TEXT    PRIMARY KEY,
    op_key   TEXT    NOT NULL UNIQUE REFERENCES operations(key),
    order_id TEXT    NOT NULL REFERENCES orders(id),
    sku      TEXT    NOT NULL,
    quantity INTEGER NOT NULL CHECK (quantity > 0),
    at       TEXT    NOT NULL
);

CREATE TABLE IF NOT EXISTS return_labels (
    id            TEXT    PRIMARY KEY,
    op_key        TEXT    NOT NULL UNIQUE REFERENCES operations(key),
    order_id      TEXT    NOT NULL REFERENCES orders(id),
    sku           TEXT    NOT NULL,
    reason        TEXT    NOT NULL,
    free_shipping INTEGER NOT NULL CHECK (free_shipping IN (0, 1)),
    at            TEXT    NOT NULL
);

CREATE TABLE IF NOT EXISTS tickets (
    id       TEXT PRIMARY KEY,
    order_id TEXT NOT NULL REFERENCES orders(id),
    customer TEXT NOT NULL,
    subject  TEXT NOT NULL,
    body     TEXT NOT NULL
);

-- The provider's usage log: one row per model call, deliberately without a
-- uniqueness constraint so that a repeated call shows up as an extra row.
CREATE TABLE IF NOT EXISTS model_calls (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id     TEXT    NOT NULL,
    ticket     TEXT    NOT NULL,
    call_index INTEGER NOT NULL,
    tokens_in  INTEGER NOT NULL DEFAULT 0,
    tokens_out INTEGER NOT NULL DEFAULT 0,
    at         TEXT    NOT NULL
);

CREATE INDEX IF NOT EXISTS model_calls_run ON model_calls (run_id);
