//! The HTML reports (`perf --html`, `eval --html`, `compare --html`): one self-contained page each, for a
//! person to look at. What the pages share is here: the page frame with its inline
//! style and script, escaping, tables and the small SVG pieces; `eval`'s page is
//! [`eval`], `perf`'s is `crate::perf::export::html`.
//!
//! Contract: a page fetches nothing (no URL in any `src` or `href`, no fonts, no
//! images but inline SVG) and every string that comes from data, a model or a server
//! goes through `escape`. The output depends only on its input, so it is reproducible.
//! The charts' tick steps (`nice_step`) are shared with `perf --svg`'s.

pub mod compare;
pub mod eval;

use std::fmt::Write as _;

/// `text` safe inside an element or a double-quoted attribute.
pub(crate) fn escape(text: &str) -> String {
    let mut s = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => s.push_str("&amp;"),
            '<' => s.push_str("&lt;"),
            '>' => s.push_str("&gt;"),
            '"' => s.push_str("&quot;"),
            '\'' => s.push_str("&#39;"),
            c => s.push(c),
        }
    }
    s
}

/// The style every page shares.
const STYLE: &str = "\
body{font-family:sans-serif;margin:24px auto;max-width:1180px;padding:0 16px;color:#222}
h1{font-size:22px;margin:0 0 12px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
dl.setting{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px;margin:0}
dl.setting dt{color:#666}dl.setting dd{margin:0}
table{border-collapse:collapse;font-size:13px;margin:6px 0}
th,td{border:1px solid #ddd;padding:3px 8px;vertical-align:top}
th{background:#f4f4f4;text-align:left}td.num{text-align:right;font-variant-numeric:tabular-nums}
table.sortable th{cursor:pointer}table.sortable th:after{content:' \\2195';color:#aaa}
td.text{max-width:330px;overflow-wrap:anywhere}
p.note{color:#555;font-size:13px}ul.warnings{color:#a33;font-size:13px}
svg{max-width:100%;height:auto}
";

/// Sorts a `sortable` table by the clicked column (again: the other way): cells sort
/// by their `data-sort` number when they have one, else by their text. A
/// `slice-filter` choice shows only the rows of its table whose `data-slices` name the
/// chosen slice (all rows for the empty choice); `#slice=NAME` in the page's address
/// chooses NAME where it is a choice.
const SCRIPT: &str = "\
document.querySelectorAll('table.sortable').forEach(function(table){
  table.querySelectorAll('th').forEach(function(th, col){
    th.addEventListener('click', function(){
      var body = table.tBodies[0];
      var up = th.dataset.dir !== 'up';
      th.dataset.dir = up ? 'up' : 'down';
      var key = function(row){
        var cell = row.cells[col];
        var n = cell.dataset.sort;
        return n === undefined ? cell.textContent : parseFloat(n);
      };
      Array.from(body.rows).sort(function(a, b){
        var x = key(a), y = key(b);
        var c = (typeof x === 'number') ? x - y : String(x).localeCompare(String(y));
        return up ? c : -c;
      }).forEach(function(row){ body.appendChild(row); });
    });
  });
});
function filterRows(select){
  var table = document.getElementById(select.dataset.table);
  Array.from(table.tBodies[0].rows).forEach(function(row){
    var slices = (row.dataset.slices || '').split(' ');
    row.hidden = select.value !== '' && slices.indexOf(select.value) < 0;
  });
}
var chosen = decodeURIComponent((location.hash.match(/^#slice=(.*)$/) || ['', ''])[1]);
document.querySelectorAll('select.slice-filter').forEach(function(select){
  select.addEventListener('change', function(){ filterRows(select); });
  if (chosen && Array.from(select.options).some(function(o){ return o.value === chosen; })) {
    select.value = chosen;
    filterRows(select);
  }
});
";

/// A whole page: `title` (escaped here) and `body` (HTML already).
pub(crate) fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<style>\n{STYLE}</style>\n</head>\n<body>\n{body}\
         <script>\n{SCRIPT}</script>\n</body>\n</html>\n",
        escape(title)
    )
}

/// A list of settings, each a name and its value in words (both escaped here).
pub(crate) fn setting_list(s: &mut String, rows: &[(&str, String)]) {
    s.push_str("<dl class=\"setting\">\n");
    for (name, value) in rows {
        let _ = writeln!(s, "<dt>{}</dt><dd>{}</dd>", escape(name), escape(value));
    }
    s.push_str("</dl>\n");
}

/// One table cell.
#[derive(Debug, Clone)]
pub(crate) enum Cell {
    /// Text (escaped when written).
    Text(String),
    /// A number shown as `shown`, sorted by `value`.
    Num { shown: String, value: f64 },
}

impl Cell {
    /// A number to `decimals` places.
    pub(crate) fn num(value: f64, decimals: usize) -> Cell {
        Cell::Num {
            shown: format!("{value:.decimals$}"),
            value,
        }
    }
}

/// A table: `class` names it (and `sortable` in it makes it sortable), `head` the
/// columns; each row is its `class` and cells.
pub(crate) fn table(s: &mut String, class: &str, head: &[&str], rows: &[(String, Vec<Cell>)]) {
    table_with_data(s, class, None, head, rows, &[]);
}

/// [`table`] with an `id`, and each row's slices (`dimension:slice` separated by
/// spaces, in `data`, row by row) in its `data-slices` for a `slice-filter` choice.
pub(crate) fn table_with_data(
    s: &mut String,
    class: &str,
    id: Option<&str>,
    head: &[&str],
    rows: &[(String, Vec<Cell>)],
    data: &[String],
) {
    match id {
        Some(id) => {
            let _ = writeln!(s, "<table class=\"{}\" id=\"{}\">", escape(class), escape(id));
        }
        None => {
            let _ = writeln!(s, "<table class=\"{}\">", escape(class));
        }
    }
    s.push_str("<thead><tr>");
    for h in head {
        let _ = write!(s, "<th>{}</th>", escape(h));
    }
    s.push_str("</tr></thead>\n<tbody>\n");
    for (i, (class, cells)) in rows.iter().enumerate() {
        match data.get(i) {
            Some(slices) => {
                let _ = write!(
                    s,
                    "<tr class=\"{}\" data-slices=\"{}\">",
                    escape(class),
                    escape(slices)
                );
            }
            None => {
                let _ = write!(s, "<tr class=\"{}\">", escape(class));
            }
        }
        for c in cells {
            match c {
                Cell::Text(t) => {
                    let _ = write!(s, "<td class=\"text\">{}</td>", escape(t));
                }
                Cell::Num { shown, value } => {
                    // A number that is not finite sorts as 0 rather than breaking the sort.
                    let key = if value.is_finite() { *value } else { 0.0 };
                    let _ = write!(
                        s,
                        "<td class=\"num\" data-sort=\"{key}\">{}</td>",
                        escape(shown)
                    );
                }
            }
        }
        s.push_str("</tr>\n");
    }
    s.push_str("</tbody>\n</table>\n");
}

/// A heading of a section.
pub(crate) fn section(s: &mut String, id: &str, title: &str) {
    let _ = writeln!(s, "<h2 id=\"{}\">{}</h2>", escape(id), escape(title));
}

/// A sentence of its own (escaped here).
pub(crate) fn note(s: &mut String, text: &str) {
    let _ = writeln!(s, "<p class=\"note\">{}</p>", escape(text));
}

/// A "nice" tick step (1, 2 or 5 × 10^k) giving about `ticks` intervals up to `max`.
pub(crate) fn nice_step(max: f64, ticks: usize) -> f64 {
    if max <= 0.0 || !max.is_finite() {
        return 1.0;
    }
    let raw = max / ticks.max(1) as f64;
    let magnitude = 10f64.powf(raw.log10().floor());
    let norm = raw / magnitude;
    let nice = if norm <= 1.0 {
        1.0
    } else if norm <= 2.0 {
        2.0
    } else if norm <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * magnitude
}

/// A chart's plot area: its frame, the x axis's label centred `x_label_y` down the
/// picture, and the y axis's label turned along the left edge at `y_label_x`.
pub(crate) struct PlotArea<'a> {
    pub left: f64,
    pub top: f64,
    pub width: f64,
    pub height: f64,
    pub x_label: &'a str,
    pub x_label_y: f64,
    pub y_label: &'a str,
    pub y_label_x: f64,
}

impl PlotArea<'_> {
    /// Horizontal grid lines, each labelled on the left, at every `step` from 0 to
    /// `y_top` (the top of the plot).
    pub(crate) fn y_grid(
        &self,
        s: &mut String,
        y_top: f64,
        step: f64,
        label: impl Fn(f64) -> String,
    ) {
        let mut y = 0.0;
        while y <= y_top + step * 1e-9 {
            let py = self.top + self.height - y / y_top * self.height;
            let _ = writeln!(
                s,
                r##"<line x1="{}" y1="{py:.1}" x2="{:.1}" y2="{py:.1}" stroke="#e5e5e5"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
                self.left,
                self.left + self.width,
                self.left - 8.0,
                py + 4.0,
                label(y)
            );
            y += step;
        }
    }

    /// Writes the frame and both labels (SVG).
    pub(crate) fn frame(&self, s: &mut String) {
        let (left, top, w, h) = (self.left, self.top, self.width, self.height);
        let _ = writeln!(
            s,
            r##"<rect x="{left}" y="{top}" width="{w}" height="{h}" fill="none" stroke="#333"/>"##
        );
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            left + w / 2.0,
            self.x_label_y,
            self.x_label
        );
        let _ = writeln!(
            s,
            r#"<text x="{0}" y="{1:.1}" text-anchor="middle" transform="rotate(-90 {0} {1:.1})">{2}</text>"#,
            self.y_label_x,
            top + h / 2.0,
            self.y_label
        );
    }
}

/// Milliseconds from microseconds, three decimals.
pub(crate) fn ms(us: f64) -> String {
    format!("{:.3}", us / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_steps() {
        assert_eq!(nice_step(10.0, 5), 2.0);
        assert_eq!(nice_step(1000.0, 5), 200.0);
        assert_eq!(nice_step(0.7, 5), 0.2);
        assert_eq!(nice_step(27.0, 6), 5.0);
        assert_eq!(nice_step(0.0, 5), 1.0);
    }

    #[test]
    fn escaping_covers_markup_and_both_quotes() {
        assert_eq!(
            escape(r#"<b>"Tom & Jerry's"</b>"#),
            "&lt;b&gt;&quot;Tom &amp; Jerry&#39;s&quot;&lt;/b&gt;"
        );
        assert_eq!(escape("naïve — ok"), "naïve — ok");
    }

    #[test]
    fn tables_escape_their_text_and_sort_numbers_by_value() {
        let mut s = String::new();
        table(
            &mut s,
            "sortable t",
            &["a<b", "n"],
            &[(
                "row".into(),
                vec![Cell::Text("</td><script>".into()), Cell::num(f64::NAN, 2)],
            )],
        );
        assert!(s.contains("<th>a&lt;b</th>"), "{s}");
        assert!(s.contains("&lt;/td&gt;&lt;script&gt;"), "{s}");
        assert!(!s.contains("<script>"), "{s}");
        assert!(s.contains("data-sort=\"0\">NaN</td>"), "{s}");
    }

    #[test]
    fn a_page_names_no_url_and_escapes_its_title() {
        let p = page("x</title><script>", "<p>body</p>\n");
        assert!(p.starts_with("<!DOCTYPE html>"));
        assert!(p.contains("<title>x&lt;/title&gt;&lt;script&gt;</title>"));
        assert!(!p.contains("http"), "{p}");
        assert!(p.contains("<p>body</p>"));
    }
}
