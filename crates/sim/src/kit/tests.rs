//! Every cloud in the list starts, takes instances and points its driver at itself.

use super::*;

#[tokio::test]
async fn every_cloud_starts_seeds_and_describes_its_driver() {
    let listed: Vec<&str> = CLOUDS.iter().map(|c| c.name).collect();
    for shipped in ["static", "cloudscale", "phoenixnap", "cloudstack"] {
        assert!(listed.contains(&shipped), "{shipped} is not in {listed:?}");
    }
    let mut unique = listed.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(
        unique.len(),
        listed.len(),
        "a cloud listed twice: {listed:?}"
    );
    for entry in CLOUDS {
        let nodes: Vec<SimNode> = (0..3).map(SimNode::numbered).collect();
        let (cloud, ids) = start_with_nodes(entry.name, StartOptions::default(), &nodes)
            .await
            .unwrap_or_else(|e| panic!("{}: {e:#}", entry.name));
        assert_eq!(cloud.name(), entry.name);
        assert_eq!(ids.len(), 3, "{}", entry.name);
        let setup = cloud.driver_setup();
        assert_eq!(setup.driver, entry.name, "the guest is named as the cloud");
        assert_eq!(setup.egress, vec![cloud.url()], "{}", entry.name);
        assert!(cloud.set_running(&ids[1], false), "{}", entry.name);
        assert!(cloud.remove_instance(&ids[2]), "{}", entry.name);
        assert!(
            !cloud.remove_instance(&ids[2]),
            "{}: removed twice",
            entry.name
        );
        assert!(
            !cloud.set_running("no-such-instance", true),
            "{}",
            entry.name
        );
        cloud.shutdown().await;
    }
}

#[tokio::test]
async fn an_unknown_cloud_names_the_known_ones() {
    let err = start("aws", StartOptions::default())
        .await
        .err()
        .expect("no aws simulator");
    let err = err.to_string();
    let listed: Vec<&str> = err
        .strip_prefix("there is no `aws` simulated cloud; choose one of ")
        .unwrap_or_else(|| panic!("{err}"))
        .split(", ")
        .collect();
    // Written here, not taken from `names()` (the function under test); a new cloud may join.
    assert_eq!(
        listed.get(..4),
        Some(&["static", "cloudscale", "phoenixnap", "cloudstack"][..]),
        "{err}"
    );
    assert!(!listed.contains(&"aws"), "{err}");
}

#[tokio::test]
async fn a_malformed_seed_is_refused_with_the_cloud_named() {
    for entry in CLOUDS {
        let cloud = start(entry.name, StartOptions::default()).await.unwrap();
        let err = cloud
            .seed(serde_json::json!({"no-such-field": 1}))
            .expect_err(entry.name);
        assert!(err.starts_with("not a "), "{}: {err}", entry.name);
        cloud.shutdown().await;
    }
}

#[tokio::test]
async fn the_soak_drives_exactly_the_clouds_whose_entry_has_a_fault_model() {
    // Written here, not taken from `soak::names()` (under test); a new cloud may join them.
    let names: Vec<&str> = soak::names().collect();
    assert_eq!(
        names.get(..3),
        Some(&["cloudscale", "phoenixnap", "cloudstack"][..])
    );
    for name in names {
        let cloud = soak::start(name, StartOptions::default().addr)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e:#}"));
        // The fault model is the listed simulator's: same name, its instances.
        assert_eq!(cloud.name(), name);
        let id = cloud
            .add_instance(0, &SimNode::numbered(0))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(cloud.remove_instance(&id), "{name}");
        assert!(cloud.lb_objects().is_empty(), "{name}");
        assert!(!cloud.kill_point_reached(), "{name}");
        cloud.arm_kill_point();
        cloud.clear_faults();
        let tally = cloud.drain_requests();
        assert_eq!((tally.reads, tally.writes), (0, 0), "{name}: {tally:?}");
        // Upcast: the soak's cloud is the kit's cloud.
        let cloud: Box<dyn SimCloud> = cloud;
        cloud.shutdown().await;
    }
    // The static inventory is listed but has no fault model: refused, naming those that have.
    let err = soak::start("static", StartOptions::default().addr)
        .await
        .err()
        .expect("the static inventory has no fault model");
    assert_eq!(
        err.to_string(),
        format!(
            "the soak has no fault model for the `static` cloud; choose {}",
            soak::names().collect::<Vec<_>>().join(", ")
        )
    );
    assert!(
        err.to_string()
            .contains("cloudscale, phoenixnap, cloudstack"),
        "{err}"
    );
}
