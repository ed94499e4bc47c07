// Wires the development page: one editor, one roofline, a theme switch.
// window.kplayDemo is there for the browser tests to read counters from.
(function () {
  "use strict";

  const CUDA_SAMPLE = [
    'extern "C" __global__ void vector_add(const float* a, const float* b,',
    "                                      float* out, int n) {",
    "    int i = blockIdx.x * blockDim.x + threadIdx.x;",
    "    if (i < n) {",
    "        out[i] = a[i] + b[i];",
    "    }",
    "}",
    "",
  ].join("\n");

  const PYTHON_SAMPLE = [
    "from numba import cuda",
    "",
    "@cuda.jit",
    "def vector_add(a, b, out):",
    "    i = cuda.grid(1)",
    "    if i < out.size:",
    "        out[i] = a[i] + b[i]",
    "",
  ].join("\n");

  const ROOFLINE = {
    device: "NVIDIA H200",
    source: "calibrated",
    memory_name: "HBM",
    memory_bytes_per_s: 4.3e12,
    compute_flops_per_s: 51e12,
    compute_name: "FP32",
    points: [
      { label: "naive", intensity_flops_per_byte: 0.25, flops_per_s: 2.1e11,
        current: false, details: { median: "96.0 µs", "GFLOP/s": "210" } },
      { label: "shared tile", intensity_flops_per_byte: 4, flops_per_s: 6.2e12,
        current: false, details: { median: "3.25 µs", "GFLOP/s": "6200" } },
      { label: "register tile", intensity_flops_per_byte: 16, flops_per_s: 3.1e13,
        current: true, details: { median: "0.65 µs", "GFLOP/s": "31000" } },
    ],
  };

  const state = { runs: 0, changes: 0, lastDoc: "", dark: false, language: "cpp" };
  window.kplayDemo = state;

  function report() {
    document.getElementById("events").textContent =
      `runs: ${state.runs} · changes: ${state.changes}`;
  }

  function setup() {
    const editor = window.KPlayEditor.create(document.getElementById("editor"), {
      doc: CUDA_SAMPLE,
      language: "cpp",
      dark: false,
      onRun: () => { state.runs += 1; report(); },
      onChange: (doc) => { state.changes += 1; state.lastDoc = doc; report(); },
    });
    state.editor = editor;

    document.getElementById("mark").addEventListener("click", () => {
      editor.markLines([
        { line: 3, severity: "error", message: "error: identifier \"blockIdy\" is undefined" },
        { line: 5, severity: "warning", message: "warning: result of addition is unused" },
        { line: 99, severity: "note", message: "note: a mark past the end lands on the last line" },
      ]);
    });
    document.getElementById("clear").addEventListener("click", () => editor.clearMarks());
    document.getElementById("language").addEventListener("click", (event) => {
      state.language = state.language === "cpp" ? "python" : "cpp";
      editor.setDoc(state.language === "cpp" ? CUDA_SAMPLE : PYTHON_SAMPLE);
      editor.setLanguage(state.language);
      event.target.textContent = state.language === "cpp" ? "Switch to Python" : "Switch to C++";
    });

    const chart = document.getElementById("roofline");
    window.KPlayRoofline.render(chart, ROOFLINE);
    document.getElementById("rerender").addEventListener("click", () => {
      const earlier = ROOFLINE.points.map((p) => ({ ...p, current: false }));
      const next = { label: `run ${earlier.length + 1}`, intensity_flops_per_byte: 32,
        flops_per_s: 4.4e13, current: true, details: { median: "0.41 µs" } };
      ROOFLINE.points = [...earlier, next];
      window.KPlayRoofline.render(chart, ROOFLINE);
    });

    document.getElementById("toggle-theme").addEventListener("click", (event) => {
      state.dark = !state.dark;
      document.documentElement.dataset.theme = state.dark ? "dark" : "light";
      editor.setDark(state.dark);
      event.target.textContent = state.dark ? "Light theme" : "Dark theme";
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", setup);
  else setup();
})();
