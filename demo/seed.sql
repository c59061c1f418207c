-- Seed data of the practice shop, loaded once into an empty shop. Times are
-- fixed so that what the agent reads (and an approver is shown) is the same on
-- every machine.

INSERT INTO orders (id, customer, email, status, currency, placed_at) VALUES
    ('LK-507862', 'Maëlle Tremblay', 'maelle.tremblay@example.com', 'delivered', 'CAD', '2026-09-28T14:12:00.000Z'),
    ('LK-640436', 'Jonas Whitfield', 'jonas.whitfield@example.com', 'delivered', 'CAD', '2026-10-01T09:40:00.000Z'),
    ('LK-793996', 'Priya Raman',     'priya.raman@example.com',     'delivered', 'CAD', '2026-10-03T18:05:00.000Z'),
    ('LK-311208', 'Dana Okafor',     'dana.okafor@example.com',     'delivered', 'USD', '2026-09-21T11:30:00.000Z'),
    ('LK-452190', 'Hugo Lefebvre',   'hugo.lefebvre@example.com',   'returned',  'CAD', '2026-09-15T16:20:00.000Z'),
    ('LK-128844', 'Ines Castillo',   'ines.castillo@example.com',   'processing','CAD', '2026-10-08T08:55:00.000Z');

INSERT INTO order_items (order_id, sku, description, quantity, unit_cents) VALUES
    ('LK-507862', 'DESKLAMP', 'Brass desk lamp',                    1, 11900),
    ('LK-640436', 'PLANTER',  'Glazed stoneware planter, 30 cm',    1,  6400),
    ('LK-640436', 'SOIL-5L',  'Potting soil, 5 litres',             2,   850),
    ('LK-793996', 'SEEDS-BASIL', 'Basil seeds, 2 g',                1,   995),
    ('LK-311208', 'MUG-OAT',  'Stoneware mug, oat glaze',           4,  1400),
    ('LK-311208', 'TEAPOT',   'Cast iron teapot, 0.8 l',            1,  3250),
    ('LK-452190', 'THROW-WOOL', 'Wool throw, charcoal',             1,  8900),
    ('LK-128844', 'KETTLE',   'Stovetop kettle, 1.5 l',             1,  4500);

INSERT INTO payments (id, order_id, amount_cents, currency, status, refunded_cents, created_at) VALUES
    ('PAY-507862-1', 'LK-507862', 11900, 'CAD', 'captured',   0,    '2026-09-28T14:12:05.000Z'),
    ('PAY-507862-2', 'LK-507862', 11900, 'CAD', 'captured',   0,    '2026-09-28T14:12:07.000Z'),
    ('PAY-640436-1', 'LK-640436',  8100, 'CAD', 'captured',   0,    '2026-10-01T09:40:04.000Z'),
    ('PAY-793996-1', 'LK-793996',   995, 'CAD', 'captured',   0,    '2026-10-03T18:05:03.000Z'),
    ('PAY-311208-1', 'LK-311208',  8850, 'USD', 'captured',   0,    '2026-09-21T11:30:06.000Z'),
    ('PAY-452190-1', 'LK-452190',  8900, 'CAD', 'refunded',   8900, '2026-09-15T16:20:02.000Z'),
    ('PAY-128844-1', 'LK-128844',  4500, 'CAD', 'authorized', 0,    '2026-10-08T08:55:01.000Z');
