// lvm2's reporting: the field table of pvs/vgs/lvs (names and headings as lvm2's
// `-o help`), the options that shape output (-o, --noheadings, --separator, --nosuffix,
// --units, --reportformat json, -S selection, -O sort keys) and the aligned or separated or
// JSON printer.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "lvm/lvm.h"

namespace volstack::cli::lvmcli {

enum class ReportKind { kPv, kVg, kLv };

struct ReportOptions {
  std::vector<std::string> options;  // -o, repeatable; "+a,b" appends to the defaults
  bool noheadings = false;
  std::string separator;
  bool separator_set = false;
  bool aligned = false;  // --aligned: pad columns also when a separator is given
  bool nosuffix = false;
  std::string units = "r";  // lvm2's default: human, '<' when rounded down
  std::string reportformat = "basic";
  bool all = false;               // lvs -a: hidden LVs too
  std::vector<std::string> sort;  // -O: "field", "-field" (descending); comma lists
  std::string select;             // -S: lvm2's selection (lvm_report_select.h)
};

void AddReportOptions(CLI::App* app, ReportOptions* options);

// One row's objects (null when not applicable).
struct ReportRow {
  const lvm::VgHandle* vg = nullptr;
  const lvm::Pv* pv = nullptr;
  int pv_index = -1;  // in vg->vg.pvs
  const lvm::LogicalVolume* lv = nullptr;
  const lvm::Segment* seg = nullptr;
  std::string pv_name;  // what the PV is called (device name, or "[unknown]")
};

// Prints the report; returns lvm2's exit code (3 for an unknown field or bad units).
int PrintReport(const Context& ctx, ReportKind kind, const ReportOptions& options,
                std::vector<ReportRow> rows);

// "/dev/loop0" etc: the device name of PV `index` of `vg`, or "[unknown]".
std::string PvDisplayName(const lvm::VgHandle& vg, int index);
std::string LvAttr(const Context& ctx, const lvm::VgHandle& vg, const lvm::LogicalVolume& lv);

}  // namespace volstack::cli::lvmcli
