//! The compaction planner: pure and deterministic.
//!
//! At compaction instant `C`, every file group not already in a pending plan
//! contributes its latest slice: the base file plus the logs whose delta
//! commit completed before `C`, in log order. Logs completing at or after
//! `C` are left for the next slice (completion-time slicing).

use std::collections::BTreeMap;

use tributary_format::{CompactionOperation, CompactionPlan};
use tributary_timeline::{FileSystemView, InstantTime};

/// Which file groups a plan takes.
#[derive(Debug, Clone)]
pub struct PlanSettings {
    /// Compact a group only when it has at least this many eligible logs.
    pub min_log_files: usize,
    /// ... or at least this many bytes of eligible logs (0: no byte rule).
    pub min_log_bytes: u64,
    /// At most this many groups per plan (those with the most logs first,
    /// then the largest log volume).
    pub max_groups: usize,
}

impl Default for PlanSettings {
    fn default() -> Self {
        Self { min_log_files: 1, min_log_bytes: 0, max_groups: usize::MAX }
    }
}

/// Plans a compaction at `instant` over `view`. `None` when no group qualifies.
///
/// Pure and synchronous: it reads only the view, so a test or a tool can
/// plan without a store; [`Compactor`](crate::Compactor) runs it and then
/// executes the plan.
pub fn plan(view: &FileSystemView, instant: &InstantTime, settings: &PlanSettings) -> Option<CompactionPlan> {
    let mut candidates: Vec<(u64, CompactionOperation)> = Vec::new();
    for group in view.groups() {
        // A group a pending compaction or clustering covers is theirs.
        if view.in_pending_plan(&group.partition, &group.file_id)
            || view.in_pending_clustering(&group.partition, &group.file_id)
        {
            continue;
        }
        let Some(slice) = group.latest() else { continue };
        if &slice.base_instant >= instant {
            continue;
        }
        let logs: Vec<_> = slice.logs.iter().filter(|l| &l.completed < instant).collect();
        let log_bytes: u64 = logs.iter().map(|l| l.file.size).sum();
        // The slice's own tombstone log is no reason to compact it again.
        let new_logs: Vec<_> = logs.iter().filter(|l| !slice.is_tombstone_log(l)).collect();
        let new_bytes: u64 = new_logs.iter().map(|l| l.file.size).sum();
        let enough = new_logs.len() >= settings.min_log_files.max(1)
            || (settings.min_log_bytes > 0 && new_bytes >= settings.min_log_bytes && !new_logs.is_empty());
        if !enough {
            continue;
        }
        let base_bytes = slice.base.as_ref().map_or(0, |b| b.file.size);
        let mb = |b: u64| b as f64 / (1024.0 * 1024.0);
        let metrics = BTreeMap::from([
            ("TOTAL_LOG_FILES".to_string(), logs.len() as f64),
            ("TOTAL_LOG_FILES_SIZE".to_string(), log_bytes as f64),
            ("TOTAL_IO_READ_MB".to_string(), mb(base_bytes + log_bytes)),
            ("TOTAL_IO_WRITE_MB".to_string(), mb(base_bytes.max(log_bytes))),
            ("TOTAL_IO_MB".to_string(), mb(base_bytes + log_bytes) + mb(base_bytes.max(log_bytes))),
        ]);
        candidates.push((
            log_bytes,
            CompactionOperation {
                base_instant_time: slice.base_instant.to_string(),
                delta_file_paths: logs.iter().map(|l| l.file.name.clone()).collect(),
                data_file_path: slice.base.as_ref().map(|b| b.file.name.clone()),
                file_id: group.file_id.clone(),
                partition_path: group.partition.clone(),
                metrics,
                bootstrap_file_path: None,
            },
        ));
    }
    if candidates.is_empty() {
        return None;
    }
    // Under a cap, the groups holding the most logs first (those nearest
    // the table's bound, where writers wait), then the largest log volume;
    // then a stable order.
    candidates.sort_by(|a, b| {
        let logs = |c: &(u64, CompactionOperation)| c.1.delta_file_paths.len();
        logs(b)
            .cmp(&logs(a))
            .then_with(|| b.0.cmp(&a.0))
            .then_with(|| (&a.1.partition_path, &a.1.file_id).cmp(&(&b.1.partition_path, &b.1.file_id)))
    });
    candidates.truncate(settings.max_groups.max(1));
    let mut operations: Vec<CompactionOperation> = candidates.into_iter().map(|(_, op)| op).collect();
    operations.sort_by(|a, b| (&a.partition_path, &a.file_id).cmp(&(&b.partition_path, &b.file_id)));
    Some(CompactionPlan { operations, ..Default::default() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::path::Path;
    use tributary_timeline::Timeline;
    use tributary_timeline::{DataFile, PlannedGroups};

    fn file(name: &str, size: u64) -> DataFile {
        DataFile { partition: "p".into(), name: name.into(), path: Path::from(format!("p/{name}")), size }
    }

    const A: &str = "00000000-0000-0000-0000-000000000000-0";
    const B: &str = "00000001-0000-0000-0000-000000000000-0";

    fn view(extra: &[&str]) -> (Timeline, FileSystemView) {
        let mut names = vec![
            "20250101000000010.deltacommit.requested",
            "20250101000000010_20250101000000020.deltacommit",
            "20250101000000015.deltacommit.requested",
            "20250101000000015_20250101000000090.deltacommit",
            "20250101000000030.deltacommit.requested",
        ];
        names.extend_from_slice(extra);
        let tl = Timeline::from_layout2_names(names);
        let files = vec![
            file(&format!(".{A}_20250101000000010.log.1_0-0-0"), 100),
            file(&format!(".{A}_20250101000000015.log.1_0-0-0"), 100),
            file(&format!(".{A}_20250101000000030.log.1_0-0-0"), 100),
            file(&format!(".{B}_20250101000000015.log.1_1-0-0"), 50),
        ];
        let v = FileSystemView::build(&tl, files, &PlannedGroups::default());
        (tl, v)
    }

    #[test]
    fn takes_logs_completed_before_the_instant() {
        let (_, v) = view(&[]);
        let c = InstantTime::parse("20250101000000050").unwrap();
        let p = plan(&v, &c, &PlanSettings::default()).unwrap();
        // Only A's first log completed before C; the log of instant 15
        // completed at 90 (after C), the one of 30 is still pending.
        assert_eq!(p.operations.len(), 1);
        assert_eq!(p.operations[0].file_id, A);
        assert_eq!(p.operations[0].delta_file_paths, vec![format!(".{A}_20250101000000010.log.1_0-0-0")]);
        assert_eq!(p.operations[0].data_file_path, None);
        assert_eq!(p.operations[0].base_instant_time, "20250101000000010");
        // Later, both completed logs qualify, for both groups.
        let c = InstantTime::parse("20250101000000095").unwrap();
        let p = plan(&v, &c, &PlanSettings::default()).unwrap();
        assert_eq!(p.operations.len(), 2);
        assert_eq!(p.operations[0].delta_file_paths.len(), 2);
        // Thresholds and caps.
        let s = PlanSettings { min_log_files: 2, ..Default::default() };
        assert_eq!(plan(&v, &c, &s).unwrap().operations.len(), 1);
        let s = PlanSettings { max_groups: 1, ..Default::default() };
        assert_eq!(plan(&v, &c, &s).unwrap().operations[0].file_id, A);
        let s = PlanSettings { min_log_files: 5, min_log_bytes: 60, ..Default::default() };
        assert_eq!(plan(&v, &c, &s).unwrap().operations.len(), 1);
        assert!(plan(&v, &InstantTime::parse("20250101000000011").unwrap(), &PlanSettings::default()).is_none());
    }

    /// A file group a pending clustering rewrites is not planned, as Hudi's
    /// planner excludes "files in pending clustering from compaction"; a
    /// group a completed replacecommit replaced is not in the view at all.
    #[test]
    fn groups_under_clustering_or_replaced_are_not_planned() {
        let (tl, _) = view(&[]);
        let files = || {
            vec![
                file(&format!(".{A}_20250101000000010.log.1_0-0-0"), 100),
                file(&format!(".{B}_20250101000000015.log.1_1-0-0"), 50),
            ]
        };
        let c = InstantTime::parse("20250101000000095").unwrap();
        let mut planned = PlannedGroups::default();
        planned.clustering.insert(("p".into(), A.into()));
        let v = FileSystemView::build(&tl, files(), &planned);
        let p = plan(&v, &c, &PlanSettings::default()).unwrap();
        assert_eq!(p.operations.iter().map(|o| o.file_id.as_str()).collect::<Vec<_>>(), [B]);
        let mut planned = PlannedGroups::default();
        planned.replaced.insert(("p".into(), B.into()), InstantTime::parse("20250101000000015").unwrap());
        let v = FileSystemView::build(&tl, files(), &planned);
        let p = plan(&v, &c, &PlanSettings::default()).unwrap();
        assert_eq!(p.operations.iter().map(|o| o.file_id.as_str()).collect::<Vec<_>>(), [A]);
        assert_eq!(v.replaced().len(), 1);
    }
}
