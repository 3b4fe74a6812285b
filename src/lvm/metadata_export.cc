// VolumeGroup -> text, in lvm2's layout (lib/format_text/export.c). The on-disk form has no
// indentation and puts the VG section first, the header keys after it, and ends with "\n"
// and a NUL; the backup form (vgcfgbackup) puts the header first and indents with tabs.
// Blank lines sit where lvm2 puts them, so volstack's text diffs cleanly against lvm2's.
#include <ctime>

#include "lvm/config_text.h"
#include "lvm/metadata.h"
#include "lvm/uuid.h"

namespace volstack::lvm {

namespace {

class Emitter {
 public:
  explicit Emitter(bool indent) : indent_(indent) {}
  void Line(const std::string& s) {
    if (indent_) out_.append(depth_, '\t');
    out_ += s;
    out_ += '\n';
  }
  void Blank() { out_ += '\n'; }
  // An array element: one level deeper than its key when indenting.
  void Item(const std::string& s) { Line(indent_ ? "\t" + s : s); }
  void Open(const std::string& key) {
    Line(key + " {");
    depth_++;
  }
  void Close() {
    depth_--;
    Line("}");
  }
  void Str(const std::string& key, const std::string& v) {
    Line(key + " = " + QuoteConfigString(v));
  }
  void Num(const std::string& key, uint64_t v) { Line(key + " = " + std::to_string(v)); }
  void List(const std::string& key, const std::vector<std::string>& v) {
    std::string s = key + " = [";
    for (size_t i = 0; i < v.size(); i++) s += (i ? ", " : "") + QuoteConfigString(v[i]);
    Line(s + "]");
  }
  // A config item with the layout it was read with.
  void Raw(const ConfigNode& item) { WriteConfigItem(item, indent_ ? depth_ : 0, indent_, &out_); }
  std::string& out() { return out_; }

 private:
  bool indent_;
  int depth_ = 0;
  std::string out_;
};

std::string AreaName(const VolumeGroup& vg, const SegmentArea& a) {
  return a.is_pv() ? "pv" + std::to_string(a.pv) : a.lv;
}

void EmitSegment(Emitter& e, const VolumeGroup& vg, const Segment& seg, size_t n) {
  if (seg.kept) {
    e.Open("segment" + std::to_string(n));
    for (const ConfigNode& item : seg.kept_items) {
      ConfigNode c = item;
      // The fields are the truth for what the model tracks; the rest is written as read.
      if (c.key == "start_extent" || c.key == "extent_count" || c.key == "type") {
        c.is_section = c.is_array = false;
        c.children.clear();
        c.rows.clear();
        ConfigValue v;
        if (c.key == "type") {
          v.text = seg.type;
        } else {
          v.type = ConfigValue::Type::kInt;
          v.integer = c.key == "start_extent" ? seg.start_extent : seg.extent_count;
        }
        c.values = {v};
      }
      e.Raw(c);
    }
    e.Close();
    return;
  }
  e.Open("segment" + std::to_string(n));
  e.Num("start_extent", seg.start_extent);
  e.Num("extent_count", seg.extent_count);
  if (!seg.tags.empty()) e.List("tags", seg.tags);
  e.Blank();
  e.Str("type", seg.type);
  const char* list_key = "stripes";
  if (seg.is_mirror()) {
    list_key = "mirrors";
    e.Num("mirror_count", seg.areas.size());
    e.Num("extents_moved", seg.extents_moved);
    if (seg.region_size) e.Num("region_size", seg.region_size);
    if (!seg.mirror_log.empty()) e.Str("mirror_log", seg.mirror_log);
  } else {
    e.Num("stripe_count", seg.areas.size());
    if (seg.areas.size() > 1) e.Num("stripe_size", seg.stripe_size);
  }
  e.Blank();
  e.Line(std::string(list_key) + " = [");
  for (size_t i = 0; i < seg.areas.size(); i++) {
    e.Item(QuoteConfigString(AreaName(vg, seg.areas[i])) + ", " +
           std::to_string(seg.areas[i].start) + (i + 1 < seg.areas.size() ? "," : ""));
  }
  e.Line("]");
  e.Close();
}

void EmitVg(Emitter& e, const VolumeGroup& vg) {
  e.Open(vg.name);
  e.Str("id", FormatId(vg.id));
  e.Num("seqno", vg.seqno);
  e.Str("format", vg.format);
  e.List("status", vg.status);
  e.List("flags", vg.flags);
  if (!vg.tags.empty()) e.List("tags", vg.tags);
  if (!vg.system_id.empty()) e.Str("system_id", vg.system_id);
  e.Num("extent_size", vg.extent_size);
  e.Num("max_lv", vg.max_lv);
  e.Num("max_pv", vg.max_pv);
  e.Num("metadata_copies", vg.metadata_copies);
  if (!vg.allocation_policy.empty()) e.Str("allocation_policy", vg.allocation_policy);
  e.Blank();
  e.Open("physical_volumes");
  for (size_t i = 0; i < vg.pvs.size(); i++) {
    const PhysicalVolume& pv = vg.pvs[i];
    e.Blank();
    e.Open("pv" + std::to_string(i));
    e.Str("id", FormatId(pv.id));
    if (!pv.device.empty()) e.Str("device", pv.device);
    if (!pv.device_id_type.empty() && !pv.device_id.empty()) {
      e.Str("device_id_type", pv.device_id_type);
      e.Str("device_id", pv.device_id);
    }
    e.Blank();
    e.List("status", pv.status);
    e.List("flags", pv.flags);
    if (!pv.tags.empty()) e.List("tags", pv.tags);
    e.Num("dev_size", pv.dev_size);
    e.Num("pe_start", pv.pe_start);
    e.Num("pe_count", pv.pe_count);
    if (pv.ba_start && pv.ba_size && *pv.ba_size) {
      e.Num("ba_start", *pv.ba_start);
      e.Num("ba_size", *pv.ba_size);
    }
    e.Close();
  }
  e.Close();
  e.Blank();
  if (!vg.lvs.empty()) {
    e.Open("logical_volumes");
    for (const LogicalVolume& lv : vg.lvs) {
      e.Blank();
      e.Open(lv.name);
      e.Str("id", FormatId(lv.id));
      e.List("status", lv.status);
      e.List("flags", lv.flags);
      if (!lv.tags.empty()) e.List("tags", lv.tags);
      if (lv.creation_time) e.Num("creation_time", *lv.creation_time);
      if (!lv.creation_host.empty()) e.Str("creation_host", lv.creation_host);
      if (!lv.lock_args.empty()) e.Str("lock_args", lv.lock_args);
      if (!lv.allocation_policy.empty()) e.Str("allocation_policy", lv.allocation_policy);
      if (!lv.profile.empty()) e.Str("profile", lv.profile);
      if (lv.read_ahead) e.Line("read_ahead = " + std::to_string(*lv.read_ahead));
      if (lv.major) e.Line("major = " + std::to_string(*lv.major));
      if (lv.minor) e.Line("minor = " + std::to_string(*lv.minor));
      e.Num("segment_count", lv.segments.size());
      e.Blank();
      for (size_t s = 0; s < lv.segments.size(); s++) EmitSegment(e, vg, lv.segments[s], s + 1);
      e.Close();
    }
    e.Close();
    e.Blank();
  }
  // lvm2's _print_historical_lvs: right after logical_volumes and its blank line.
  if (vg.historical_lvs) e.Raw(*vg.historical_lvs);
  e.Close();
}

std::string TimeString(uint64_t t) {
  time_t tt = static_cast<time_t>(t);
  struct tm tm;
  gmtime_r(&tt, &tm);
  char buf[64];
  strftime(buf, sizeof(buf), "%a %b %e %H:%M:%S %Y", &tm);
  return buf;
}

void EmitHeader(Emitter& e, const ExportInfo& info, bool backup) {
  e.Line("# Generated by volstack (LVM2 text format, lvm2 2.03 compatible): " +
         TimeString(info.creation_time));
  e.Blank();
  e.Str("contents", "Text Format Volume Group");
  e.Num("version", 1);
  e.Blank();
  e.Str("description", info.description);
  e.Blank();
  std::string host = "creation_host = " + QuoteConfigString(info.creation_host);
  if (!info.uname.empty()) host += "\t# " + info.uname;
  e.Line(host);
  e.Line("creation_time = " + std::to_string(info.creation_time) + "\t# " +
         TimeString(info.creation_time));
  if (!backup) e.Blank();
}

}  // namespace

std::string ExportVg(const VolumeGroup& vg, const ExportInfo& info) {
  Emitter e(info.backup_form);
  if (info.backup_form) {
    EmitHeader(e, info, true);
    e.Blank();
    EmitVg(e, vg);
    return e.out();
  }
  EmitVg(e, vg);
  EmitHeader(e, info, false);
  e.out() += '\0';
  return e.out();
}

}  // namespace volstack::lvm
