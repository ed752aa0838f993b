-- Table maintenance as applications write it: a GENERATED ALWAYS identity (DEFAULT VALUES, OVERRIDING SYSTEM VALUE),
-- CHECK and NOT NULL violations, DROP DEFAULT, DROP COLUMN [IF EXISTS], partial unique indexes, sequences with
-- setval and RESTART, SET LOCAL in a serializable block, NOT VALID then VALIDATE, primary and foreign keys added
-- after the table, ON DELETE CASCADE.
CREATE TABLE acct (id int GENERATED ALWAYS AS IDENTITY PRIMARY KEY, owner text NOT NULL, balance numeric(12,2) NOT NULL DEFAULT 0 CHECK (balance >= 0), kind text DEFAULT 'std', note text);
INSERT INTO acct (owner) VALUES ('a');
INSERT INTO acct DEFAULT VALUES;
INSERT INTO acct (owner, balance) VALUES ('b', 10), ('c', 20) RETURNING *;
INSERT INTO acct (id, owner) VALUES (99, 'x');
INSERT INTO acct (id, owner) OVERRIDING SYSTEM VALUE VALUES (99, 'x') RETURNING id;
UPDATE acct SET balance = balance - 15 WHERE owner = 'b';
ALTER TABLE acct ALTER COLUMN kind DROP DEFAULT;
INSERT INTO acct (owner) VALUES ('d') RETURNING kind;
ALTER TABLE acct DROP COLUMN IF EXISTS nothere;
ALTER TABLE acct DROP COLUMN note;
CREATE UNIQUE INDEX acct_owner_active ON acct (owner) WHERE balance > 0;
CREATE SEQUENCE invoice_no START 1000 INCREMENT 10;
SELECT nextval('invoice_no'), nextval('invoice_no'), currval('invoice_no');
SELECT setval('invoice_no', 5000), nextval('invoice_no');
ALTER SEQUENCE invoice_no RESTART WITH 1;
SELECT nextval('invoice_no');
BEGIN ISOLATION LEVEL SERIALIZABLE;
SET LOCAL statement_timeout = '5s';
SHOW statement_timeout;
SELECT count(*) FROM acct;
COMMIT;
SHOW statement_timeout;
SHOW transaction_isolation;
SELECT owner FROM acct ORDER BY owner COLLATE "C";
SELECT owner, balance FROM acct ORDER BY balance DESC NULLS LAST, owner LIMIT 3;
ALTER TABLE acct ADD CONSTRAINT acct_owner_len CHECK (char_length(owner) < 10) NOT VALID;
ALTER TABLE acct VALIDATE CONSTRAINT acct_owner_len;
CREATE TABLE ledger (id bigserial, acct_id int NOT NULL, amount numeric(12,2) NOT NULL, at timestamptz NOT NULL DEFAULT now());
ALTER TABLE ledger ADD PRIMARY KEY (id);
ALTER TABLE ledger ADD FOREIGN KEY (acct_id) REFERENCES acct (id) ON DELETE CASCADE;
INSERT INTO ledger (acct_id, amount) SELECT id, balance FROM acct WHERE balance > 0;
SELECT a.owner, sum(l.amount) FROM acct a JOIN ledger l ON l.acct_id = a.id GROUP BY a.owner HAVING sum(l.amount) > 10 ORDER BY 1;
DELETE FROM acct WHERE owner = 'c';
SELECT count(*) FROM ledger;
SELECT conname, contype FROM pg_constraint WHERE conrelid = 'acct'::regclass ORDER BY conname;
