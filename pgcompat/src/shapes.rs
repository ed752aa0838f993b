//! Translations reused across statements that differ only in their integer literals.
//!
//! A client that sends its values inline (psycopg2, Django, Rails without prepared statements, pgbench's
//! simple mode) sends a new text for every statement: `UPDATE accounts SET balance = balance + -42 WHERE id =
//! 7`, then `… + 15 WHERE id = 9`. The text cache never hits, and each statement is parsed and translated
//! again (a third of the compute's CPU per statement under pgbench's TPC-B). Here such a statement's *shape*,
//! its text with each unsigned integer literal cut out, keys a template: the translation with each literal's
//! place marked, filled in with the next statement's values.
//!
//! **When a shape is trusted.** Only if its translation carries each literal through as text, whatever the
//! value: the shape's second statement is translated as usual, then again with each literal replaced by a
//! distinct sentinel number, again with every literal `0`, and again with every literal `1`. The template is
//! the sentinel translation with each sentinel's occurrences (whole numbers, not parts of a longer token) as
//! the literal's slots; it is kept only if every literal has a slot and filling it with the statement's own
//! values, with zeros and with ones gives exactly (every field of [`Translation`]) what the translator gave
//! for those texts. A translation that consumes a value (an `ORDER BY` position, a `TABLESAMPLE` percentage),
//! types it by its size, or treats `0` or `1` apart (the translator's special cases) fails one of these and
//! marks the shape opaque: its statements are translated every time, as before. Only queries and DML
//! (`SELECT`, `INSERT`, `UPDATE`, `DELETE`) are learned; literals are the unsigned integers of at most ten
//! digits within `int4` (as PostgreSQL types them: bigger ones type `int8` and stay in the shape).
//!
//! **Cutting a text without tokenizing it** ([`ShapeMemo`]). Tokenizing a text to find its literals was most
//! of what a filled statement cost (6 % of the compute's CPU under TPC-B). A text's *digit runs* (maximal runs
//! of ASCII digits, wherever they are) are found with one pass over its bytes, and the text with each run
//! replaced by the slot mark keys a memo of how the tokenizer cut a text of that form before (an exemplar):
//! which runs were literals, and the exact digits of every other run (in names, strings, comments, bigger or
//! decimal numbers). A new text with the same key and the same digits in every other run differs from the
//! exemplar only inside runs the tokenizer read as whole integer literals; it is cut the same way if each new
//! value is itself an `int4` literal and each literal's neighbours cannot join a number token (a letter, digit,
//! `_`, `$`, `.` or quote beside a literal keeps the form out of the memo). Anything else is tokenized.
//!
//! **Literals as parameters** ([`Template::bind`]). A filled text is still new to SQLite, which compiles it
//! again (9 % of the compute's CPU under TPC-B). A template of one step, with no parameters of its own, also
//! keeps a form of that step in which the literals in a few places are parameters `?1…?n`: every text of the
//! shape then has the same SQLite text, which the connection's statement cache serves compiled
//! ([`Translation::bound`]). Only places where a parameter means what the literal does: the right operand of
//! a comparison or arithmetic operator (`aid = 7`, `abalance + -42`, past a unary sign) and the value
//! `pg_coerce(` converts (an INSERT's values). Never where SQLite reads a bare integer as something else
//! (`ORDER BY 1`, `GROUP BY 1`), as a result column (a bare parameter column is typed as the parameter), nor
//! anywhere not listed. SQLite compares and computes with a bound integer exactly as with an integer literal
//! (neither has an affinity); what can differ is only the plan (an index on an expression holding the literal,
//! a partial index whose condition names it), never the result.
//!
//! **Bounds.** A shape is learned at its second sighting (a text seen once pays one tokenization, not four
//! translations), at most [`SHAPES_MAX`] shapes are remembered per session (oldest out first), at most
//! [`LITERALS_MAX`] literals per text, and texts longer than [`crate::CACHED_SQL_BYTES_MAX`] are not shaped.
//! The caller clears the shapes with its text cache when the catalog changes, and keys them by the same
//! effective `search_path`.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::tokenizer::{Location, Token, Tokenizer};

use crate::translate::{Bound, Kind, Translated, Translation};

/// Most shapes a session remembers (seen once, opaque or learned); the oldest goes first.
pub const SHAPES_MAX: usize = 512;
/// Most literals a shaped text may have.
pub const LITERALS_MAX: usize = 64;

/// Marks a literal's place in a shape's key; a text that holds it is never shaped.
const SLOT_MARK: char = '\u{1}';
/// The first sentinel; the i-th is `SENTINEL_BASE + i * SENTINEL_STEP`: ten digits, in `int4`, distinct.
const SENTINEL_BASE: u64 = 1_000_000_007;
const SENTINEL_STEP: u64 = 1_000_003;

/// A text cut into its shape (the key) and its integer literals, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shape {
    /// The text with each literal replaced by one `\u{1}`.
    pub key: String,
    /// Each literal's digits.
    pub values: Vec<String>,
    /// The text around the literals: `pieces.len() == values.len() + 1`.
    pieces: Vec<String>,
}

impl Shape {
    /// `text`'s shape, or `None` if it has no integer literal, more than [`LITERALS_MAX`], holds the slot mark,
    /// or does not tokenize.
    pub fn of(text: &str) -> Option<Shape> {
        if !Shape::worth_cutting(text) {
            return None;
        }
        let tokens = Tokenizer::new(&PostgreSqlDialect {}, text)
            .tokenize_with_location()
            .ok()?;
        let lines = LineStarts::new(text);
        let mut spans = Vec::new();
        for (index, token) in tokens.iter().enumerate() {
            let Token::Number(digits, false) = &token.token else {
                continue;
            };
            if !is_int4_literal(digits) {
                continue;
            }
            let start = lines.offset(text, token.span.start)?;
            let end = start.checked_add(digits.len())?;
            // The token is exactly these digits in the text, and is not glued to a following number part.
            if text.get(start..end) != Some(digits.as_str()) {
                return None;
            }
            if matches!(tokens.get(index + 1).map(|t| &t.token), Some(Token::Period)) {
                continue;
            }
            spans.push((start, end));
            if spans.len() > LITERALS_MAX {
                return None;
            }
        }
        if spans.is_empty() {
            return None;
        }
        let mut key = String::with_capacity(text.len());
        let mut pieces = Vec::with_capacity(spans.len() + 1);
        let mut values = Vec::with_capacity(spans.len());
        let mut at = 0;
        for (start, end) in spans {
            if start < at {
                return None;
            }
            let piece = text.get(at..start)?;
            key.push_str(piece);
            key.push(SLOT_MARK);
            pieces.push(piece.to_owned());
            values.push(text.get(start..end)?.to_owned());
            at = end;
        }
        let rest = text.get(at..)?;
        key.push_str(rest);
        pieces.push(rest.to_owned());
        debug_assert_eq!(pieces.len(), values.len() + 1);
        Some(Shape { key, values, pieces })
    }

    /// The checks before a text is cut: not too long, no slot mark, some digit (a text with no digit has no
    /// literal).
    fn worth_cutting(text: &str) -> bool {
        text.len() <= crate::CACHED_SQL_BYTES_MAX
            && !text.contains(SLOT_MARK)
            && text.bytes().any(|b| b.is_ascii_digit())
    }

    /// The text with the literals replaced by `values` (as many as the shape has).
    pub fn with_values<S: AsRef<str>>(&self, values: &[S]) -> String {
        assert_eq!(values.len(), self.values.len(), "one value per literal");
        let mut text = String::with_capacity(self.key.len() + values.len() * 10);
        for (piece, value) in self.pieces.iter().zip(values) {
            text.push_str(piece);
            text.push_str(value.as_ref());
        }
        text.push_str(self.pieces.last().expect("a shape has one more piece than values"));
        text
    }
}

/// Whether `digits` is an unsigned integer literal PostgreSQL types `int4`, written without leading zeros.
fn is_int4_literal(digits: &str) -> bool {
    !digits.is_empty()
        && digits.len() <= 10
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'))
        && digits.parse::<u64>().is_ok_and(|value| value <= i32::MAX as u64)
}

/// Most text forms a session's [`ShapeMemo`] remembers; the oldest goes first.
pub const FORMS_MAX: usize = 512;

/// How the tokenizer cut texts of each form (see the module doc): the shape of a text of a known form comes
/// from one pass over its bytes.
#[derive(Debug, Default)]
pub struct ShapeMemo {
    forms: HashMap<String, Arc<Exemplar>>,
    /// The forms in the order they were learned, oldest first.
    order: VecDeque<String>,
    /// Texts cut from the memo, not tokenized.
    hits: u64,
}

/// One form's digit runs, in order, as the tokenizer read them in the text that taught it.
#[derive(Debug)]
struct Exemplar {
    runs: Vec<Run>,
}

#[derive(Debug)]
enum Run {
    /// An `int4` literal: a new text's digits here are its value.
    Literal,
    /// Any other run: a new text must have exactly these digits here.
    Fixed(String),
}

/// A text's digit runs as byte ranges, and its form: the text with each run replaced by the slot mark.
fn digit_runs(text: &str) -> (String, Vec<(usize, usize)>) {
    let bytes = text.as_bytes();
    let mut form = String::with_capacity(text.len());
    let mut runs = Vec::new();
    let mut copied = 0;
    let mut at = 0;
    while at < bytes.len() {
        if !bytes[at].is_ascii_digit() {
            at += 1;
            continue;
        }
        let start = at;
        while at < bytes.len() && bytes[at].is_ascii_digit() {
            at += 1;
        }
        // ASCII digits are whole characters: both ends are character boundaries.
        form.push_str(&text[copied..start]);
        form.push(SLOT_MARK);
        runs.push((start, at));
        copied = at;
    }
    form.push_str(&text[copied..]);
    (form, runs)
}

/// Whether a literal's neighbouring byte (`None` at the text's ends) leaves its token the same whatever its
/// digits: nothing that could join a number, a name or a quoted token.
fn is_clear_neighbour(byte: Option<u8>) -> bool {
    byte.is_none_or(|b| !(b.is_ascii_alphanumeric() || matches!(b, b'_' | b'$' | b'.' | b'\'' | b'"')))
}

impl ShapeMemo {
    /// `text`'s shape, as [`Shape::of`] gives it: from the memo when a text of its form was cut before and
    /// differs from it only in literals, else by tokenizing (and then the form is remembered, if it can be).
    pub fn shape_of(&mut self, text: &str) -> Option<Shape> {
        if !Shape::worth_cutting(text) {
            return None;
        }
        let (form, runs) = digit_runs(text);
        if let Some(exemplar) = self.forms.get(&form) {
            if let Some(shape) = exemplar.cut(text, &runs) {
                self.hits += 1;
                return Some(shape);
            }
            return Shape::of(text);
        }
        let shape = Shape::of(text)?;
        if let Some(exemplar) = Exemplar::of(text, &runs, &shape) {
            if self.order.len() >= FORMS_MAX {
                if let Some(oldest) = self.order.pop_front() {
                    self.forms.remove(&oldest);
                }
            }
            self.forms.insert(form.clone(), Arc::new(exemplar));
            self.order.push_back(form);
            assert!(self.order.len() <= FORMS_MAX, "forms over their bound");
        }
        Some(shape)
    }

    /// How many texts were cut from the memo rather than tokenized.
    pub fn hits(&self) -> u64 {
        self.hits
    }
}

impl Exemplar {
    /// What `shape` (tokenized from `text`, whose digit runs are `runs`) teaches about its form, if every
    /// literal is exactly one run with clear neighbours.
    fn of(text: &str, runs: &[(usize, usize)], shape: &Shape) -> Option<Exemplar> {
        let bytes = text.as_bytes();
        // The literals' byte ranges, from the shape's pieces: each literal follows its piece.
        let mut literals = Vec::with_capacity(shape.values.len());
        let mut at = 0;
        for (piece, value) in shape.pieces.iter().zip(&shape.values) {
            let start = at + piece.len();
            let end = start + value.len();
            literals.push((start, end));
            at = end;
        }
        let mut literals = literals.into_iter().peekable();
        let mut exemplar = Vec::with_capacity(runs.len());
        for &(start, end) in runs {
            if literals.peek() == Some(&(start, end)) {
                literals.next();
                let before = start.checked_sub(1).map(|i| bytes[i]);
                if !is_clear_neighbour(before) || !is_clear_neighbour(bytes.get(end).copied()) {
                    return None;
                }
                exemplar.push(Run::Literal);
            } else {
                exemplar.push(Run::Fixed(text.get(start..end)?.to_owned()));
            }
        }
        // Every literal was one whole run.
        if literals.next().is_some() {
            return None;
        }
        Some(Exemplar { runs: exemplar })
    }

    /// `text`'s shape (its form is this exemplar's, its digit runs `runs`), if it differs from the exemplar's
    /// text only in literals that are still `int4` literals.
    fn cut(&self, text: &str, runs: &[(usize, usize)]) -> Option<Shape> {
        if runs.len() != self.runs.len() {
            return None;
        }
        let literals = self.runs.iter().filter(|run| matches!(run, Run::Literal)).count();
        let mut key = String::with_capacity(text.len());
        let mut pieces = Vec::with_capacity(literals + 1);
        let mut values = Vec::with_capacity(literals);
        let mut at = 0;
        for (run, &(start, end)) in self.runs.iter().zip(runs) {
            let digits = text.get(start..end)?;
            match run {
                Run::Fixed(fixed) if fixed == digits => {}
                Run::Fixed(_) => return None,
                Run::Literal => {
                    if !is_int4_literal(digits) {
                        return None;
                    }
                    let piece = text.get(at..start)?;
                    key.push_str(piece);
                    key.push(SLOT_MARK);
                    pieces.push(piece.to_owned());
                    values.push(digits.to_owned());
                    at = end;
                }
            }
        }
        let rest = text.get(at..)?;
        key.push_str(rest);
        pieces.push(rest.to_owned());
        Some(Shape { key, values, pieces })
    }
}

/// Byte offsets of a text's line starts, to turn the tokenizer's (line, column) into offsets.
struct LineStarts(Vec<usize>);

impl LineStarts {
    fn new(text: &str) -> LineStarts {
        let mut starts = vec![0];
        starts.extend(text.match_indices('\n').map(|(at, _)| at + 1));
        LineStarts(starts)
    }

    /// The byte offset of `location` (1-based line and column, the column counted in characters).
    fn offset(&self, text: &str, location: Location) -> Option<usize> {
        let line = usize::try_from(location.line).ok()?.checked_sub(1)?;
        let column = usize::try_from(location.column).ok()?.checked_sub(1)?;
        let start = *self.0.get(line)?;
        let rest = text.get(start..)?;
        rest.char_indices().nth(column).map(|(at, _)| start + at)
    }
}

/// One piece of a template's step: text, or the slot of literal `n`.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Text(String),
    Slot(usize),
    /// Literal `n` as the next parameter (only in [`Template::bindable`]).
    Bind(usize),
}

/// A shape's translation with each literal's place marked.
#[derive(Debug)]
pub struct Template {
    /// The translation made with sentinels (its steps are replaced when filled in).
    translations: Vec<Translation>,
    /// Each translation's steps, cut at the slots.
    steps: Vec<Vec<Vec<Part>>>,
    /// How many literals the shape has (every one has at least one slot).
    literals: usize,
    /// The one step with the slots that may be parameters marked [`Part::Bind`] (see the module doc), if
    /// the template has one step, no parameters of its own and at least one such slot.
    bindable: Option<Vec<Part>>,
}

impl Template {
    /// The template of `shape`, if `translate` carries its literals through as text (see the module doc);
    /// `translated` is what `translate` gave for the shape's own text.
    pub fn learn(
        shape: &Shape,
        translated: &Translated,
        mut translate: impl FnMut(&str) -> Option<Translated>,
    ) -> Option<Template> {
        let Translated::Statements(own) = translated else {
            return None;
        };
        if own.is_empty() || !own.iter().all(|t| is_learnable(&t.kind)) {
            return None;
        }
        let sentinels: Vec<String> = (0..shape.values.len())
            .map(|i| (SENTINEL_BASE + i as u64 * SENTINEL_STEP).to_string())
            .collect();
        let Translated::Statements(with_sentinels) = translate(&shape.with_values(&sentinels))? else {
            return None;
        };
        if with_sentinels.len() != own.len() {
            return None;
        }
        let mut seen = vec![false; sentinels.len()];
        let steps: Vec<Vec<Vec<Part>>> = with_sentinels
            .iter()
            .map(|t| t.steps.iter().map(|step| cut(step, &sentinels, &mut seen)).collect())
            .collect();
        if !seen.iter().all(|&s| s) {
            return None;
        }
        let bindable = match (with_sentinels.as_slice(), steps.as_slice()) {
            ([translation], [step_parts])
                if translation.params.is_empty()
                    && translation.captures.is_empty()
                    && !translation.foreign_keys_off
                    && step_parts.len() == 1 =>
            {
                bindable_parts(&step_parts[0])
            }
            _ => None,
        };
        let template = Template {
            translations: with_sentinels,
            steps,
            literals: shape.values.len(),
            bindable,
        };
        if template.fill(&shape.values) != *own {
            return None;
        }
        for digit in ["0", "1"] {
            let values = vec![digit; shape.values.len()];
            let Translated::Statements(expected) = translate(&shape.with_values(&values))? else {
                return None;
            };
            if template.fill(&values) != expected {
                return None;
            }
        }
        Some(template)
    }

    /// The translation of the shape's text with `values` (one per literal of the shape: texts of one key have
    /// as many).
    pub fn fill<S: AsRef<str>>(&self, values: &[S]) -> Vec<Translation> {
        assert_eq!(values.len(), self.literals, "one value per literal of the shape");
        self.translations
            .iter()
            .zip(&self.steps)
            .map(|(translation, steps)| {
                let mut filled = translation.clone();
                filled.steps = steps
                    .iter()
                    .map(|parts| {
                        let mut step = String::new();
                        for part in parts {
                            match part {
                                Part::Text(text) => step.push_str(text),
                                Part::Slot(n) | Part::Bind(n) => step.push_str(values[*n].as_ref()),
                            }
                        }
                        step
                    })
                    .collect();
                filled
            })
            .collect()
    }
}

/// Only these kinds are learned: their translation has no side effect and no name the caller keeps.
fn is_learnable(kind: &Kind) -> bool {
    matches!(kind, Kind::Select | Kind::Insert | Kind::Update | Kind::Delete)
}

/// `step` cut at each whole occurrence of a sentinel (not inside a longer run of digits, letters, `_` or `.`),
/// marking the literals found in `seen`.
fn cut(step: &str, sentinels: &[String], seen: &mut [bool]) -> Vec<Part> {
    let bytes = step.as_bytes();
    let is_word = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'.' || b == b'$';
    let mut parts = Vec::new();
    let (mut text_start, mut at) = (0, 0);
    while at < bytes.len() {
        let starts_number = bytes[at].is_ascii_digit() && (at == 0 || !is_word(bytes[at - 1]));
        if starts_number {
            let end = at + bytes[at..].iter().take_while(|b| b.is_ascii_digit()).count();
            let whole = end == bytes.len() || !is_word(bytes[end]);
            if whole {
                if let Some(n) = sentinels.iter().position(|s| s.as_bytes() == &bytes[at..end]) {
                    if text_start < at {
                        parts.push(Part::Text(step[text_start..at].to_owned()));
                    }
                    parts.push(Part::Slot(n));
                    seen[n] = true;
                    text_start = end;
                }
            }
            at = end;
            continue;
        }
        at += 1;
    }
    if text_start < bytes.len() {
        parts.push(Part::Text(step[text_start..].to_owned()));
    }
    parts
}

impl Template {
    /// The template's one step filled with `values` with the bindable literals as parameters, and their
    /// values (see [`Translation::bound`]); `None` if the template has no such step.
    pub fn bind<S: AsRef<str>>(&self, values: &[S]) -> Option<Bound> {
        let parts = self.bindable.as_ref()?;
        assert_eq!(values.len(), self.literals, "one value per literal of the shape");
        let mut step = String::new();
        let mut bound = Vec::new();
        for part in parts {
            match part {
                Part::Text(text) => step.push_str(text),
                Part::Slot(n) => step.push_str(values[*n].as_ref()),
                Part::Bind(n) => {
                    // An `int4` literal's digits (the shape's rule) always parse; anything else stays inline.
                    match values[*n].as_ref().parse::<i64>() {
                        Ok(value) => {
                            bound.push(value);
                            step.push('?');
                            step.push_str(&bound.len().to_string());
                        }
                        Err(_) => step.push_str(values[*n].as_ref()),
                    }
                }
            }
        }
        Some(Bound { step, values: bound })
    }
}

/// `parts` with each slot a parameter may take marked [`Part::Bind`]; `None` if none may, or if the text
/// holds a `?` already (parameters of its own).
fn bindable_parts(parts: &[Part]) -> Option<Vec<Part>> {
    let has_parameter = parts
        .iter()
        .any(|part| matches!(part, Part::Text(text) if text.contains('?')));
    if has_parameter {
        return None;
    }
    let mut marked = Vec::with_capacity(parts.len());
    let mut any = false;
    for (index, part) in parts.iter().enumerate() {
        let bindable = match (part, index.checked_sub(1).map(|i| &parts[i])) {
            (Part::Slot(_), Some(Part::Text(before))) => bindable_after(before),
            _ => false,
        };
        marked.push(match part {
            Part::Slot(n) if bindable => {
                any = true;
                Part::Bind(*n)
            }
            other => other.clone(),
        });
    }
    any.then_some(marked)
}

/// Words after which a `+` or `-` is a sign, not an operator.
const SIGN_AFTER_WORDS: &[&str] = &[
    "ALL",
    "AND",
    "AS",
    "BETWEEN",
    "BY",
    "CASE",
    "DISTINCT",
    "ELSE",
    "ESCAPE",
    "EXCEPT",
    "FROM",
    "GLOB",
    "HAVING",
    "IN",
    "INTERSECT",
    "IS",
    "JOIN",
    "LIKE",
    "LIMIT",
    "NOT",
    "OFFSET",
    "ON",
    "OR",
    "REGEXP",
    "RETURNING",
    "SELECT",
    "SET",
    "THEN",
    "UNION",
    "USING",
    "VALUES",
    "WHEN",
    "WHERE",
    "WITH",
];

/// Whether a literal right after `before` (the SQLite text before it) may be a parameter with the same
/// meaning (see the module doc): after a comparison or arithmetic operator, a sign after one, or
/// `pg_coerce(`.
fn bindable_after(before: &str) -> bool {
    let text = before.trim_end();
    if text.ends_with("--") {
        return false;
    }
    if let Some(rest) = text.strip_suffix("pg_coerce(") {
        return !rest.ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_');
    }
    let Some(last) = text.chars().last() else {
        return false;
    };
    match last {
        '=' | '<' | '>' | '*' | '/' | '%' => true,
        '+' | '-' => {
            let rest = text[..text.len() - 1].trim_end();
            match rest.chars().last() {
                // After an operand: the binary operator.
                Some(')' | '"' | '\'' | ']' | '`') => true,
                Some(c) if c.is_ascii_digit() => true,
                Some(c) if c.is_ascii_alphabetic() || c == '_' => {
                    let word_start = rest
                        .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                        .map_or(0, |at| at + 1);
                    let word = rest[word_start..].to_ascii_uppercase();
                    // A name is an operand; a keyword makes this a sign at the start of an expression, where
                    // a parameter is not the same (`ORDER BY -1`).
                    !SIGN_AFTER_WORDS.contains(&word.as_str())
                }
                // A sign after an operator (`+ -42`): as the operator allows.
                Some(_) => bindable_after(rest),
                None => false,
            }
        }
        _ => false,
    }
}

/// What a session knows of a shape.
#[derive(Debug, Clone)]
pub enum Known {
    /// Seen once: learned if seen again.
    SeenOnce,
    /// Its translation does not carry its literals through: translated every time.
    Opaque,
    /// Learned.
    Learned(Arc<Template>),
}

/// A session's shapes, by effective `search_path` then key, bounded by [`SHAPES_MAX`].
#[derive(Debug, Default)]
pub struct Shapes {
    known: HashMap<Arc<str>, HashMap<String, Known>>,
    /// (path, key) of each shape known, oldest first.
    order: VecDeque<(Arc<str>, String)>,
}

impl Shapes {
    /// What is known of `key` under `path`.
    pub fn get(&self, path: &Arc<str>, key: &str) -> Option<&Known> {
        self.known.get(path).and_then(|by_key| by_key.get(key))
    }

    /// Records what is known of `key` under `path`, forgetting the oldest shape past the bound.
    pub fn set(&mut self, path: Arc<str>, key: String, known: Known) {
        let by_key = self.known.entry(path.clone()).or_default();
        if by_key.insert(key.clone(), known).is_none() {
            if self.order.len() >= SHAPES_MAX {
                if let Some((oldest_path, oldest)) = self.order.pop_front() {
                    if let Some(by_key) = self.known.get_mut(&oldest_path) {
                        by_key.remove(&oldest);
                        if by_key.is_empty() {
                            self.known.remove(&oldest_path);
                        }
                    }
                }
            }
            self.order.push_back((path, key));
        }
        assert!(self.order.len() <= SHAPES_MAX, "shapes over their bound");
    }

    /// Forgets every shape (the catalog changed).
    pub fn clear(&mut self) {
        self.known.clear();
        self.order.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shape_cuts_out_unsigned_int4_literals_only() {
        let shape =
            Shape::of("UPDATE t SET v = v + -42 WHERE id = 7 AND x = 1.5 AND y = 'a 9' AND z = t2.c").expect("shape");
        assert_eq!(shape.values, vec!["42", "7"]);
        assert_eq!(
            shape.key,
            "UPDATE t SET v = v + -\u{1} WHERE id = \u{1} AND x = 1.5 AND y = 'a 9' AND z = t2.c"
        );
        assert_eq!(
            shape.with_values(&["1", "2"]),
            "UPDATE t SET v = v + -1 WHERE id = 2 AND x = 1.5 AND y = 'a 9' AND z = t2.c"
        );
        // int8-sized, leading zeros, exponents, hexadecimal: part of the shape.
        assert_eq!(Shape::of("SELECT 2147483648, 007, 1e5, 0x10"), None);
        assert_eq!(
            Shape::of("SELECT 2147483647").expect("shape").values,
            vec!["2147483647"]
        );
        assert_eq!(Shape::of("SELECT a FROM t"), None);
        assert_eq!(Shape::of("SELECT '\u{1}', 5"), None);
        assert_eq!(Shape::of("SELECT $1 FROM t -- 5"), None);
    }

    #[test]
    fn offsets_follow_lines_and_wide_characters() {
        let text = "SELECT 'é',\n  'ü',  12\n-- 3\n, 45";
        let shape = Shape::of(text).expect("shape");
        assert_eq!(shape.values, vec!["12", "45"]);
        assert_eq!(shape.with_values(&["12", "45"]), text);
    }

    #[test]
    fn a_step_is_cut_at_whole_sentinels_only() {
        let sentinels = vec!["1000000007".to_owned(), "1001000010".to_owned()];
        let mut seen = vec![false; 2];
        let parts = cut(
            "SELECT -1000000007, x1000000007, 10000000071, 1000000007.5, 1001000010",
            &sentinels,
            &mut seen,
        );
        assert_eq!(
            parts,
            vec![
                Part::Text("SELECT -".to_owned()),
                Part::Slot(0),
                Part::Text(", x1000000007, 10000000071, 1000000007.5, ".to_owned()),
                Part::Slot(1),
            ]
        );
        assert_eq!(seen, vec![true, true]);
    }

    #[test]
    fn shapes_stay_within_their_bound() {
        let mut shapes = Shapes::default();
        let path: Arc<str> = Arc::from("public");
        for i in 0..SHAPES_MAX + 10 {
            shapes.set(path.clone(), format!("k{i}"), Known::SeenOnce);
        }
        assert_eq!(shapes.order.len(), SHAPES_MAX);
        assert_eq!(shapes.known[&path].len(), SHAPES_MAX);
        assert!(shapes.get(&path, "k0").is_none());
        assert!(shapes.get(&path, &format!("k{}", SHAPES_MAX + 9)).is_some());
    }

    #[test]
    fn the_memo_cuts_a_known_form_without_tokenizing_and_as_the_tokenizer_would() {
        let mut memo = ShapeMemo::default();
        let first = "UPDATE t SET v = v + -42 WHERE id = 7 AND name = 'x9' AND t2.c = 3.5";
        assert_eq!(memo.shape_of(first), Shape::of(first));
        assert_eq!(memo.hits(), 0, "the first text of a form is tokenized");
        let second = "UPDATE t SET v = v + -1 WHERE id = 123456 AND name = 'x9' AND t2.c = 3.5";
        assert_eq!(memo.shape_of(second), Shape::of(second));
        assert_eq!(memo.hits(), 1);
        // Another run's digits differ (the string, the name, the decimal): tokenized.
        for other in [
            "UPDATE t SET v = v + -1 WHERE id = 5 AND name = 'x8' AND t2.c = 3.5",
            "UPDATE t SET v = v + -1 WHERE id = 5 AND name = 'x9' AND t3.c = 3.5",
            "UPDATE t SET v = v + -1 WHERE id = 5 AND name = 'x9' AND t2.c = 3.6",
            // A value that is no longer an int4 literal.
            "UPDATE t SET v = v + -2147483648 WHERE id = 5 AND name = 'x9' AND t2.c = 3.5",
            "UPDATE t SET v = v + -007 WHERE id = 5 AND name = 'x9' AND t2.c = 3.5",
        ] {
            assert_eq!(memo.shape_of(other), Shape::of(other), "{other}");
        }
        assert_eq!(memo.hits(), 1);
    }

    #[test]
    fn a_literal_beside_what_could_join_it_keeps_its_form_out_of_the_memo() {
        // Clear neighbours (`[`, `]`, `,`, a space): the form is memoized.
        let mut memo = ShapeMemo::default();
        for text in [
            "SELECT x[1], 5.e1 FROM t",
            "SELECT x[2], 5.e1 FROM t",
            "SELECT x[3], 5.e1 FROM t",
        ] {
            assert_eq!(memo.shape_of(text), Shape::of(text), "{text}");
        }
        assert_eq!(memo.hits(), 2);
        // `5x` is the literal 5 then the name x (`SELECT 5x` is `SELECT 5 AS x`), but `0x…` would start a
        // hexadecimal literal: a literal glued to a letter keeps its form out, so every text is tokenized.
        assert!(
            Shape::of("SELECT 5x FROM t").is_some(),
            "the tokenizer reads 5 as a literal here"
        );
        let mut memo = ShapeMemo::default();
        for text in [
            "SELECT 5x FROM t",
            "SELECT 6x FROM t",
            "SELECT 0x FROM t",
            "SELECT 7x FROM t",
        ] {
            assert_eq!(memo.shape_of(text), Shape::of(text), "{text}");
        }
        assert_eq!(memo.hits(), 0);
    }

    #[test]
    fn the_memo_stays_within_its_bound() {
        let mut memo = ShapeMemo::default();
        for i in 0..FORMS_MAX + 10 {
            // A name of letters only (digits would be runs of the same form).
            let name: String = i.to_string().bytes().map(|d| char::from(b'a' + (d - b'0'))).collect();
            let text = format!("SELECT 1 FROM t{name}");
            memo.shape_of(&text);
        }
        assert_eq!(memo.order.len(), FORMS_MAX);
        assert_eq!(memo.forms.len(), FORMS_MAX);
    }

    mod model {
        use super::*;
        use proptest::prelude::*;

        /// Pieces a text is made of: literals, numbers of other kinds and digits inside other tokens.
        fn piece() -> impl Strategy<Value = String> {
            prop_oneof![
                (0u64..3_000_000_000).prop_map(|n| n.to_string()),
                Just("0".to_owned()),
                Just("007".to_owned()),
                (0u32..100).prop_map(|n| format!("{n}.5")),
                (0u32..100).prop_map(|n| format!("{n}e3")),
                (0u32..100).prop_map(|n| format!("0x{n}")),
                (0u32..100).prop_map(|n| format!("t{n}")),
                (0u32..100).prop_map(|n| format!("'s{n}'")),
                (0u32..100).prop_map(|n| format!("\"c {n}\"")),
                (0u32..100).prop_map(|n| format!("/* {n} */")),
                (0u32..100).prop_map(|n| format!("$${n}$$")),
                (0u32..100).prop_map(|n| format!("${n}")),
                (0u32..100).prop_map(|n| format!("x[{n}]")),
                (0u32..100).prop_map(|n| format!("-{n}")),
                (0u32..100).prop_map(|n| format!("E'\\{n}'")),
                (0u32..100).prop_map(|n| format!("{n}_000")),
                (0u32..100).prop_map(|n| format!("{n}::int")),
                (0u32..100).prop_map(|n| format!("{n}.")),
                (0u32..100).prop_map(|n| format!("{n}abc")),
                Just("-- 7\n".to_owned()),
                Just("'it''s 5'".to_owned()),
                Just("é".to_owned()),
                Just("'".to_owned()),
            ]
        }

        proptest! {
            /// Texts of a few forms, each with values varied between its texts: the memo's shape is always the
            /// tokenizer's.
            #[test]
            fn the_memo_agrees_with_the_tokenizer(
                forms in proptest::collection::vec(proptest::collection::vec(piece(), 1..8), 1..4),
                variants in proptest::collection::vec((0usize..4, proptest::collection::vec(0u64..3_000_000_000, 8)), 1..24),
            ) {
                let mut memo = ShapeMemo::default();
                for (form, values) in variants {
                    let Some(pieces) = forms.get(form % forms.len()) else { continue };
                    // The form's pieces, with each plain number among them replaced by the variant's value.
                    let text = pieces
                        .iter()
                        .zip(&values)
                        .map(|(piece, value)| match piece.parse::<u64>() {
                            Ok(_) => value.to_string(),
                            Err(_) => piece.clone(),
                        })
                        .collect::<Vec<_>>()
                        .join(" ");
                    let text = format!("SELECT {text}");
                    prop_assert_eq!(memo.shape_of(&text), Shape::of(&text), "{}", text);
                }
            }
        }
    }
}
