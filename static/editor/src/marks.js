// Line marks from the compiler: a lint diagnostic per mark (gutter marker,
// underline, hover tooltip, Mod-Shift-m panel for keyboard users) plus a
// whole-line highlight, which the lint package does not draw by itself.
import { StateEffect, StateField } from "@codemirror/state";
import { Decoration, EditorView } from "@codemirror/view";
import { setDiagnostics } from "@codemirror/lint";

const SEVERITY_RANK = { note: 0, warning: 1, error: 2 };
const LINT_SEVERITY = { note: "info", warning: "warning", error: "error" };

const setLineMarks = StateEffect.define();

const lineMarkField = StateField.define({
  create: () => Decoration.none,
  update(decorations, tr) {
    let next = decorations.map(tr.changes);
    for (const effect of tr.effects) {
      if (effect.is(setLineMarks)) next = effect.value;
    }
    return next;
  },
  provide: (field) => EditorView.decorations.from(field),
});

export const lineMarkExtension = [lineMarkField];

function normaliseSeverity(severity) {
  return Object.hasOwn(SEVERITY_RANK, severity) ? severity : "error";
}

// Lines are 1-based; anything outside the document (or not a number) is
// clamped so a stale compiler log never throws.
function clampLine(line, lineCount) {
  const n = Math.round(Number(line));
  if (!Number.isFinite(n)) return 1;
  return Math.min(Math.max(n, 1), lineCount);
}

function toDiagnostic(doc, mark) {
  const line = doc.line(clampLine(mark.line, doc.lines));
  const severity = normaliseSeverity(mark.severity);
  const column = Math.round(Number(mark.column));
  // Start at the reported column when there is one, else at the first
  // non-blank character, so the underline sits under the code, not the indent.
  let from = line.from + (line.text.length - line.text.trimStart().length);
  if (Number.isFinite(column) && column >= 1) from = Math.min(line.from + column - 1, line.to);
  return {
    line: line.number,
    severity,
    diagnostic: {
      from,
      to: line.to,
      severity: LINT_SEVERITY[severity],
      message: String(mark.message ?? ""),
      source: mark.source ? String(mark.source) : undefined,
    },
  };
}

function lineDecorations(doc, items) {
  const worst = new Map();
  for (const item of items) {
    const seen = worst.get(item.line);
    if (!seen || SEVERITY_RANK[item.severity] > SEVERITY_RANK[seen]) {
      worst.set(item.line, item.severity);
    }
  }
  const ranges = [...worst.entries()]
    .sort((a, b) => a[0] - b[0])
    .map(([lineNo, severity]) =>
      Decoration.line({
        class: `cm-kplay-line cm-kplay-line-${severity}`,
        attributes: { "data-kplay-severity": severity },
      }).range(doc.line(lineNo).from),
    );
  return Decoration.set(ranges);
}

export function markLines(view, marks) {
  const doc = view.state.doc;
  const items = (Array.isArray(marks) ? marks : []).map((mark) => toDiagnostic(doc, mark));
  const spec = setDiagnostics(
    view.state,
    items.map((item) => item.diagnostic),
  );
  const effects = [].concat(spec.effects ?? []);
  effects.push(setLineMarks.of(lineDecorations(doc, items)));
  view.dispatch({ ...spec, effects });
}

export function clearMarks(view) {
  markLines(view, []);
}
