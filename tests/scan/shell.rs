//! The programs a shell text runs, read the way `sh` reads them closely enough for the
//! scripts and `sh -c` strings of the tests: the first word of every command (after
//! assignments and redirections), inside `$(…)`, backquotes, pipelines, lists, `if`/`while`
//! bodies, `find -exec`, and after `exec`, `env`, `nice`, `nohup`, `timeout`, `xargs`.
//! Here-document bodies, `[[ … ]]`, `(( … ))` and `case` patterns are skipped; the names
//! of the script's own functions are not programs; a word with `$`, `{` or a quote in it
//! is not known until it runs, so it is not reported.

/// The programs `text` runs, in order of appearance, each once.
pub fn programs(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut functions = Vec::new();
    scan(&strip_heredocs(text), &mut found, &mut functions);
    let mut seen = Vec::new();
    for word in found {
        if !functions.contains(&word) && !seen.contains(&word) {
            seen.push(word);
        }
    }
    seen
}

/// `text` without the bodies of its here-documents (`<<'EOF'` … `EOF`).
fn strip_heredocs(text: &str) -> String {
    let mut out = String::new();
    let mut until: Option<String> = None;
    for line in text.lines() {
        if let Some(end) = &until {
            if line.trim() == end {
                until = None;
            }
            continue;
        }
        if let Some(at) = line.find("<<")
            && !line[at..].starts_with("<<<")
        {
            let tag: String = line[at + 2..]
                .trim_start_matches('-')
                .trim_start()
                .chars()
                .filter(|c| *c != '\'' && *c != '"')
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !tag.is_empty() {
                until = Some(tag);
            }
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// A lexed word, or an operator that ends a command.
#[derive(Debug, PartialEq)]
enum Token {
    Word(String),
    /// `;`, `&`, `|`, `&&`, `||`, a newline, `(`, `{`, `}`.
    Break,
    /// `)`: also what ends a `case` pattern.
    Close,
    /// `;;`: what ends a `case` branch.
    EndBranch,
}

/// Words and breaks of `text`; what `$(…)` and backquotes hold is scanned on its own (into
/// `found`), and stands in its word as `$`.
fn tokens(text: &str, found: &mut Vec<String>, functions: &mut Vec<String>) -> Vec<Token> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut word = String::new();
    let mut i = 0;
    let flush = |word: &mut String, out: &mut Vec<Token>| {
        if !word.is_empty() {
            out.push(Token::Word(std::mem::take(word)));
        }
    };
    while i < chars.len() {
        let c = chars[i];
        match c {
            '#' if word.is_empty() => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
                continue;
            }
            '\\' => {
                // A line continuation, or an escaped character kept in the word.
                if chars.get(i + 1) != Some(&'\n') {
                    word.push(chars.get(i + 1).copied().unwrap_or(' '));
                }
                i += 2;
                continue;
            }
            '\'' => {
                word.push('\'');
                i += 1;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
            }
            '"' => {
                word.push('"');
                i += 1;
                while i < chars.len() && chars[i] != '"' {
                    if chars[i] == '\\' {
                        i += 1;
                    } else if chars[i] == '$' && chars.get(i + 1) == Some(&'(') {
                        i = substitution(&chars, i + 2, found, functions);
                        continue;
                    } else if chars[i] == '`' {
                        i = backquoted(&chars, i + 1, found, functions);
                        continue;
                    }
                    i += 1;
                }
            }
            // Process substitution, `<(…)`: a command whose output is a file name.
            '<' | '>' if chars.get(i + 1) == Some(&'(') => {
                i = substitution(&chars, i + 2, found, functions);
                word.push('$');
                continue;
            }
            '$' if chars.get(i + 1) == Some(&'(') => {
                if chars.get(i + 2) == Some(&'(') {
                    i = skip_to(&chars, i + 3, "))");
                } else {
                    i = substitution(&chars, i + 2, found, functions);
                }
                word.push('$');
                continue;
            }
            '`' => {
                i = backquoted(&chars, i + 1, found, functions);
                word.push('$');
                continue;
            }
            '(' if chars.get(i + 1) == Some(&'(') && word.is_empty() => {
                i = skip_to(&chars, i + 2, "))");
                continue;
            }
            '[' if chars.get(i + 1) == Some(&'[') && word.is_empty() => {
                i = skip_to(&chars, i + 2, "]]");
                out.push(Token::Word("[[".into()));
                continue;
            }
            // `2>&1`, `>&2`: a redirection, not a background job.
            '&' if word.ends_with(['<', '>']) => word.push(c),
            ')' => {
                flush(&mut word, &mut out);
                out.push(Token::Close);
            }
            ';' if chars.get(i + 1) == Some(&';') => {
                flush(&mut word, &mut out);
                out.push(Token::EndBranch);
                i += 1;
            }
            ';' | '&' | '|' | '\n' | '(' => {
                flush(&mut word, &mut out);
                out.push(Token::Break);
            }
            '{' | '}' if word.is_empty() && chars.get(i + 1).is_none_or(|n| n.is_whitespace()) => {
                out.push(Token::Break);
            }
            c if c.is_whitespace() => flush(&mut word, &mut out),
            c => word.push(c),
        }
        i += 1;
    }
    flush(&mut word, &mut out);
    out
}

/// Scans `$(…)` from `start` (just inside it); returns the index after its `)`.
fn substitution(
    chars: &[char],
    start: usize,
    found: &mut Vec<String>,
    functions: &mut Vec<String>,
) -> usize {
    let (mut depth, mut i) = (1, start);
    let mut quote: Option<char> = None;
    while i < chars.len() {
        match (quote, chars[i]) {
            (None, '\'' | '"') => quote = Some(chars[i]),
            (Some(q), c) if c == q => quote = None,
            (None, '(') => depth += 1,
            (None, ')') => {
                depth -= 1;
                if depth == 0 {
                    break;
                }
            }
            _ => {}
        }
        i += 1;
    }
    let inner: String = chars[start..i.min(chars.len())].iter().collect();
    scan(&inner, found, functions);
    i + 1
}

/// Scans a backquoted command from `start`; returns the index after its closing backquote.
fn backquoted(
    chars: &[char],
    start: usize,
    found: &mut Vec<String>,
    functions: &mut Vec<String>,
) -> usize {
    let end = (start..chars.len())
        .find(|&i| chars[i] == '`')
        .unwrap_or(chars.len());
    let inner: String = chars[start..end].iter().collect();
    scan(&inner, found, functions);
    end + 1
}

/// The index just after the next `close` from `start`.
fn skip_to(chars: &[char], start: usize, close: &str) -> usize {
    let close: Vec<char> = close.chars().collect();
    (start..chars.len())
        .find(|&i| chars[i..].starts_with(&close))
        .map_or(chars.len(), |i| i + close.len())
}

/// Words that open or continue a compound command: the next word is a command.
const KEYWORDS: [&str; 14] = [
    "if", "then", "else", "elif", "fi", "do", "done", "while", "until", "!", "time", "esac", "in",
    "function",
];

/// Words after which the next word is a command run by this one (`timeout`'s duration and
/// `env`'s assignments are passed over as at any command's start).
const RUNNERS: [&str; 7] = ["exec", "env", "nice", "nohup", "timeout", "xargs", "-exec"];

fn scan(text: &str, found: &mut Vec<String>, functions: &mut Vec<String>) {
    let tokens = tokens(text, found, functions);
    let mut at_start = true;
    // After `for`, `case` and `[[`: no command until the next break.
    let mut skip_words = false;
    // After a redirection operator alone (`>`, `2>`): its target.
    let mut target = false;
    // In a `case`: 1 from `case` to `in`, 2 in a pattern (up to its `)`), 3 in a branch.
    let mut case = 0;
    for (i, token) in tokens.iter().enumerate() {
        if case == 1 || case == 2 {
            match token {
                Token::Word(w) if w == "in" && case == 1 => case = 2,
                Token::Word(w) if w == "esac" => case = 0,
                Token::Close if case == 2 => {
                    case = 3;
                    at_start = true;
                }
                _ => {}
            }
            continue;
        }
        let word = match token {
            Token::EndBranch => {
                case = 2;
                continue;
            }
            Token::Break | Token::Close => {
                at_start = true;
                skip_words = false;
                continue;
            }
            Token::Word(w) => w.as_str(),
        };
        if word == "case" && at_start {
            case = 1;
            continue;
        }
        if word == "esac" {
            case = 0;
            continue;
        }
        if word == "-exec" {
            at_start = true;
            continue;
        }
        if std::mem::take(&mut target) || !at_start || skip_words {
            continue;
        }
        let assignment = word.split_once('=').is_some_and(|(name, _)| {
            !name.is_empty() && name.chars().all(|c| c.is_alphanumeric() || c == '_')
        });
        let redirection = word.starts_with(['<', '>'])
            || (word.starts_with(|c: char| c.is_ascii_digit()) && word.contains(['<', '>']));
        if assignment || redirection {
            target = redirection && word.ends_with(['<', '>']);
            continue;
        }
        // A `case` pattern (`pat)`), or a subshell's last word.
        if tokens.get(i + 1) == Some(&Token::Close) || KEYWORDS.contains(&word) {
            continue;
        }
        if word == "for" || word == "[[" {
            skip_words = true;
            continue;
        }
        // `name() {`: a function of the script, not a program.
        if tokens.get(i + 1) == Some(&Token::Break) && text.contains(&format!("{word}()")) {
            functions.push(word.to_owned());
            continue;
        }
        if word.parse::<f64>().is_ok() {
            // `timeout 20 busybox …`: still looking for the command.
            continue;
        }
        at_start = RUNNERS.contains(&word);
        if word.contains(['$', '{', '\'', '"', '*']) || word.starts_with('-') {
            continue;
        }
        found.push(word.rsplit('/').next().unwrap_or(word).to_owned());
    }
}
