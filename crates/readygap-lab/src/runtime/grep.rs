//! The patterns the lab's `grep` understands: literal text, `.`, the anchors `^` and `$`,
//! `\` escapes, and with `-E` groups with alternation (`^(MemTotal|Cached):`). That covers
//! the fixed node scripts; anything else (`*`, `+`, `?`, `[...]`, `{n}`) is refused with a
//! message rather than matched wrongly.

/// One element of a pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Item {
    Char(char),
    Any,
    Start,
    End,
    /// Alternatives, each a sequence.
    Alt(Vec<Vec<Item>>),
}

/// A compiled pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pattern {
    alternatives: Vec<Vec<Item>>,
}

impl Pattern {
    /// Compiles `text` as a basic (`extended: false`) or extended regular expression.
    pub(crate) fn new(text: &str, extended: bool) -> Result<Self, String> {
        let chars: Vec<char> = text.chars().collect();
        let mut pos = 0;
        let alternatives = parse_alternatives(&chars, &mut pos, extended, 0)?;
        if pos != chars.len() {
            return Err("Unmatched ) or \\)".into());
        }
        Ok(Self { alternatives })
    }

    /// Whether the pattern matches anywhere in `line`.
    pub(crate) fn is_match(&self, line: &str) -> bool {
        let text: Vec<char> = line.chars().collect();
        let whole = [Item::Alt(self.alternatives.clone())];
        (0..=text.len()).any(|start| matches(&whole, &text, start, &|_| true))
    }
}

fn parse_alternatives(
    chars: &[char],
    pos: &mut usize,
    extended: bool,
    depth: usize,
) -> Result<Vec<Vec<Item>>, String> {
    let mut alternatives = vec![Vec::new()];
    while let Some(&c) = chars.get(*pos) {
        let at_start = alternatives.last().is_some_and(Vec::is_empty);
        *pos += 1;
        let item = match c {
            '(' if extended => {
                let inner = parse_alternatives(chars, pos, extended, depth + 1)?;
                if chars.get(*pos) != Some(&')') {
                    return Err("Unmatched ( or \\(".into());
                }
                *pos += 1;
                Item::Alt(inner)
            }
            ')' if extended => {
                if depth == 0 {
                    return Err("Unmatched ) or \\)".into());
                }
                *pos -= 1;
                return Ok(alternatives);
            }
            '|' if extended => {
                alternatives.push(Vec::new());
                continue;
            }
            '^' if at_start || extended => Item::Start,
            '$' if extended || *pos == chars.len() => Item::End,
            '.' => Item::Any,
            '\\' => match chars.get(*pos) {
                Some(&e) if !e.is_ascii_alphanumeric() && e != '(' && e != ')' && e != '|' => {
                    *pos += 1;
                    Item::Char(e)
                }
                Some(_) => {
                    return Err(format!(
                        "the lab's grep does not know \\{} (it knows ^, $, ., (a|b) with -E, and literals)",
                        chars[*pos]
                    ));
                }
                None => return Err("Trailing backslash".into()),
            },
            '*' | '[' => return Err(unsupported(c)),
            '+' | '?' | '{' if extended => return Err(unsupported(c)),
            c => Item::Char(c),
        };
        if let Some(seq) = alternatives.last_mut() {
            seq.push(item);
        }
    }
    if depth > 0 {
        return Err("Unmatched ( or \\(".into());
    }
    Ok(alternatives)
}

fn unsupported(c: char) -> String {
    format!("the lab's grep does not know {c:?} (it knows ^, $, ., (a|b) with -E, and literals)")
}

/// Whether `items` match `text` from `pos`, with `rest` deciding on what follows.
fn matches(items: &[Item], text: &[char], pos: usize, rest: &dyn Fn(usize) -> bool) -> bool {
    let Some((first, tail)) = items.split_first() else {
        return rest(pos);
    };
    match first {
        Item::Char(c) => text.get(pos) == Some(c) && matches(tail, text, pos + 1, rest),
        Item::Any => pos < text.len() && matches(tail, text, pos + 1, rest),
        Item::Start => pos == 0 && matches(tail, text, pos, rest),
        Item::End => pos == text.len() && matches(tail, text, pos, rest),
        Item::Alt(alternatives) => alternatives
            .iter()
            .any(|alt| matches(alt, text, pos, &|p| matches(tail, text, p, rest))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(pattern: &str, extended: bool, line: &str) -> bool {
        Pattern::new(pattern, extended)
            .expect("pattern")
            .is_match(line)
    }

    #[test]
    fn the_node_scripts_patterns() {
        assert!(m("^Cached:", false, "Cached:          1735500 kB"));
        assert!(!m("^Cached:", false, "SwapCached:            0 kB"));
        assert!(m("^cpu ", false, "cpu  1 2 3 4"));
        assert!(!m("^cpu ", false, "cpu0 1 2 3 4"));
        let keys = "^(MemTotal|MemFree|MemAvailable|Buffers|Cached|Shmem|SwapTotal|SwapFree):";
        for yes in [
            "MemTotal: 1 kB",
            "Cached: 5 kB",
            "SwapFree: 0 kB",
            "Shmem: 1 kB",
        ] {
            assert!(m(keys, true, yes), "{yes}");
        }
        for no in [
            "SwapCached: 0 kB",
            "ShmemHugePages: 0 kB",
            "Active(file): 1 kB",
            "",
        ] {
            assert!(!m(keys, true, no), "{no}");
        }
    }

    #[test]
    fn basic_and_extended_differ_on_groups() {
        assert!(m("a(b|c)", false, "xa(b|c)"));
        assert!(!m("a(b|c)", false, "ac"));
        assert!(m("a(b|c)", true, "ac"));
        assert!(m("x|y", true, "y"));
        assert!(m("^a.c$", false, "abc"));
        assert!(!m("^a.c$", false, "abcd"));
        assert!(m("", false, "anything"));
        assert!(m("\\.", false, "a.b") && !m("\\.", false, "ab"));
        // Nested groups backtrack into what follows.
        assert!(m("^((a|ab)c|x)d", true, "abcd"));
    }

    #[test]
    fn unknown_syntax_is_refused() {
        for (p, e) in [
            ("a*", false),
            ("[ab]", false),
            ("a+", true),
            ("(a", true),
            ("a)", true),
            ("a\\", false),
            ("\\d", true),
        ] {
            assert!(Pattern::new(p, e).is_err(), "{p}");
        }
        // In a basic expression these are literals.
        assert!(m("a+b?", false, "a+b?"));
    }

    proptest::proptest! {
        #[test]
        fn never_panics(p in "[ -~]{0,20}", line in "[ -~]{0,30}", e: bool) {
            if let Ok(p) = Pattern::new(&p, e) {
                let _ = p.is_match(&line);
            }
        }
    }
}
