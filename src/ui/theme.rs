//! Themes: semantic colour roles (ok, warn, error, segment_t0_t1, chart_limit, ...) read from
//! TOML. The presets in `themes/*.toml` are embedded in the binary; user themes in
//! `~/.config/readygap/themes/NAME.toml` are layered over the default theme, so a user file
//! only names the roles it changes. A bad file (unknown key, bad colour) is an error naming the
//! file and the key; the caller falls back to the default and shows the message.
//!
//! The file shape (all keys optional, strings) is kept apart from the resolved [`Theme`]
//! (every role a [`Color`]).

use ratatui::style::{Color, Modifier, Style};
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// A theme file could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ThemeError {
    #[error("theme {file}: {message}")]
    Syntax { file: String, message: String },
    #[error("theme {file}: unknown key `{key}` (known roles: {known})")]
    UnknownKey {
        file: String,
        key: String,
        known: String,
    },
    #[error("theme {file}: key `{key}`: {message}")]
    BadValue {
        file: String,
        key: String,
        message: String,
    },
    #[error("theme {file}: reading: {message}")]
    Io { file: String, message: String },
}

macro_rules! roles {
    ($($role:ident),* $(,)?) => {
        /// A resolved theme: a colour for every role.
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub struct Theme {
            pub name: String,
            $(pub $role: Color,)*
        }

        /// The names of all roles, as written in theme files.
        pub const ROLES: &[&str] = &[$(stringify!($role)),*];

        impl Theme {
            /// Set a role by its file name; `false` when there is no such role.
            fn set(&mut self, role: &str, color: Color) -> bool {
                match role {
                    $(stringify!($role) => { self.$role = color; true })*
                    _ => false,
                }
            }

            /// The colour of a role by its file name.
            pub fn role(&self, role: &str) -> Option<Color> {
                match role {
                    $(stringify!($role) => Some(self.$role),)*
                    _ => None,
                }
            }

            /// Every role set to one colour (the base the default file fills in).
            fn uniform(name: &str, c: Color) -> Theme {
                Theme { name: name.to_string(), $($role: c,)* }
            }
        }
    };
}

roles!(
    ok,
    warn,
    error,
    muted,
    accent,
    text,
    background,
    border,
    title,
    segment_t0_t1,
    segment_t1_t2,
    segment_t2_t3,
    segment_t3_t4,
    chart_usage,
    chart_working_set,
    chart_limit,
    chart_ready,
    chart_serving,
    chart_terminating,
    gap_highlight,
);

/// The presets shipped in the binary: (name, TOML text).
pub const BUILTIN: &[(&str, &str)] = &[
    ("default", include_str!("../../themes/default.toml")),
    ("light", include_str!("../../themes/light.toml")),
    (
        "solarized-dark",
        include_str!("../../themes/solarized-dark.toml"),
    ),
    (
        "high-contrast",
        include_str!("../../themes/high-contrast.toml"),
    ),
    ("monochrome", include_str!("../../themes/monochrome.toml")),
];

impl Theme {
    /// The default (dark) theme. The embedded file is checked by a test; should it ever fail
    /// to parse, every role falls back to the terminal's own colours.
    pub fn default_theme() -> Theme {
        let base = Theme::uniform("default", Color::Reset);
        Theme::parse_over(&base, "default", "themes/default.toml", BUILTIN[0].1).unwrap_or(base)
    }

    /// A shipped preset by name.
    pub fn builtin(name: &str) -> Option<Theme> {
        let (_, text) = BUILTIN.iter().find(|(n, _)| *n == name)?;
        let base = Theme::default_theme();
        Theme::parse_over(&base, name, &format!("themes/{name}.toml"), text).ok()
    }

    /// Parse a theme file's text over `base`: roles the file leaves out keep `base`'s colours.
    /// `file` names the file in errors.
    pub fn parse_over(
        base: &Theme,
        name: &str,
        file: &str,
        text: &str,
    ) -> Result<Theme, ThemeError> {
        let table: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| ThemeError::Syntax {
                file: file.to_string(),
                message: e.message().to_string(),
            })?;
        let mut theme = base.clone();
        theme.name = name.to_string();
        for (key, value) in &table {
            if !ROLES.contains(&key.as_str()) {
                return Err(ThemeError::UnknownKey {
                    file: file.to_string(),
                    key: key.clone(),
                    known: ROLES.join(", "),
                });
            }
            let bad = |message: String| ThemeError::BadValue {
                file: file.to_string(),
                key: key.clone(),
                message,
            };
            let s = value
                .as_str()
                .ok_or_else(|| bad(format!("expected a colour string, found {value}")))?;
            let color = parse_color(s).ok_or_else(|| {
                bad(format!(
                    "bad colour {s:?} (use a name such as \"red\", \"#rrggbb\" or an index 0-255)"
                ))
            })?;
            theme.set(key, color);
        }
        Ok(theme)
    }

    /// Read a user theme file over the default theme; the theme's name is the file stem.
    pub fn load_file(path: &Path) -> Result<Theme, ThemeError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ThemeError::Io {
            file: file.clone(),
            message: e.to_string(),
        })?;
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "user".into());
        Theme::parse_over(&Theme::default_theme(), &name, &file, &text)
    }

    pub fn text(&self) -> Style {
        Style::new().fg(self.text)
    }
    pub fn muted(&self) -> Style {
        Style::new().fg(self.muted)
    }
    pub fn ok(&self) -> Style {
        Style::new().fg(self.ok)
    }
    pub fn warn(&self) -> Style {
        Style::new().fg(self.warn)
    }
    /// Errors are bold as well, so they stand out in monochrome themes too.
    pub fn error(&self) -> Style {
        Style::new().fg(self.error).add_modifier(Modifier::BOLD)
    }
    pub fn accent(&self) -> Style {
        Style::new().fg(self.accent)
    }
    pub fn border(&self) -> Style {
        Style::new().fg(self.border)
    }
    pub fn title(&self) -> Style {
        Style::new().fg(self.title).add_modifier(Modifier::BOLD)
    }
    /// The whole screen's base style.
    pub fn base(&self) -> Style {
        Style::new().fg(self.text).bg(self.background)
    }
    /// The colour of the segment ending at mark `k` (1..=4).
    pub fn segment(&self, k: usize) -> Color {
        match k {
            1 => self.segment_t0_t1,
            2 => self.segment_t1_t2,
            3 => self.segment_t2_t3,
            _ => self.segment_t3_t4,
        }
    }
}

impl Default for Theme {
    fn default() -> Self {
        Theme::default_theme()
    }
}

/// A colour: a name (`red`, `lightgreen`, `darkgray`, `reset`), `#rrggbb`, or an index `0`..`255`.
pub fn parse_color(s: &str) -> Option<Color> {
    let s = s.trim();
    if s.is_empty() {
        return None;
    }
    if let Some(hex) = s.strip_prefix('#')
        && (hex.len() != 6 || !hex.chars().all(|c| c.is_ascii_hexdigit()))
    {
        return None;
    }
    Color::from_str(s).ok()
}

/// All themes available: presets, then user themes (which may replace a preset by name).
#[derive(Debug, Clone)]
pub struct Themes {
    /// In cycling order.
    themes: Vec<Theme>,
}

impl Themes {
    /// The presets only.
    pub fn builtin() -> Themes {
        let themes = BUILTIN.iter().filter_map(|(name, _)| Theme::builtin(name));
        Themes {
            themes: themes.collect(),
        }
    }

    fn add(&mut self, theme: Theme) {
        match self.themes.iter_mut().find(|t| t.name == theme.name) {
            Some(t) => *t = theme,
            None => self.themes.push(theme),
        }
    }

    /// Presets plus the `*.toml` files of `dir` (when it exists). Bad files are skipped and
    /// returned as errors, in file name order.
    pub fn load(dir: Option<&Path>) -> (Themes, Vec<ThemeError>) {
        let mut t = Themes::builtin();
        let mut errors = Vec::new();
        let Some(dir) = dir else {
            return (t, errors);
        };
        let mut files: Vec<PathBuf> = match std::fs::read_dir(dir) {
            Ok(rd) => rd
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "toml"))
                .collect(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => {
                errors.push(ThemeError::Io {
                    file: dir.display().to_string(),
                    message: e.to_string(),
                });
                Vec::new()
            }
        };
        files.sort();
        for f in files {
            match Theme::load_file(&f) {
                Ok(theme) => t.add(theme),
                Err(e) => errors.push(e),
            }
        }
        (t, errors)
    }

    /// Theme names in cycling order (presets first).
    pub fn names(&self) -> Vec<String> {
        self.themes.iter().map(|t| t.name.clone()).collect()
    }

    pub fn get(&self, name: &str) -> Option<&Theme> {
        self.themes.iter().find(|t| t.name == name)
    }

    /// The named theme, or the default with an error message when there is none.
    pub fn pick(&self, name: &str) -> (Theme, Option<String>) {
        match self.get(name) {
            Some(t) => (t.clone(), None),
            None => (
                Theme::default_theme(),
                Some(format!(
                    "unknown theme {name:?} (have: {}); using default",
                    self.names().join(", ")
                )),
            ),
        }
    }
}
