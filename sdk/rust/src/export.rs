//! [`export_driver!`](crate::export_driver) and the glue it expands to.
//!
//! The macro defines a hidden unit struct in the driver's crate, implements the generated
//! `Guest` traits of the selected world on it by delegating to the driver's trait impls, and
//! invokes wit-bindgen's export macro for it. The driver value made by `init` lives in a
//! thread-local: a component instance is single-threaded, so the driver need not be `Sync`.

use std::cell::RefCell;

use crate::types::ProviderError;

/// The message of every call made before `init` succeeded.
#[doc(hidden)]
pub const NOT_INITIALISED: &str =
    "driver not initialised: the host calls provider.init before any other function";

/// Holds the driver value between calls.
#[doc(hidden)]
pub struct DriverCell<T>(RefCell<Option<T>>);

impl<T> DriverCell<T> {
    /// An empty cell: no driver until `init`.
    pub const fn new() -> Self {
        Self(RefCell::new(None))
    }

    /// Stores the outcome of `init`. A failed `init` clears the cell, so later calls report
    /// "not initialised" instead of running on a configuration the host refused.
    pub fn set(&self, driver: Result<T, ProviderError>) -> Result<(), ProviderError> {
        let mut slot = self.0.try_borrow_mut().map_err(|_| busy())?;
        match driver {
            Ok(driver) => {
                *slot = Some(driver);
                Ok(())
            }
            Err(e) => {
                *slot = None;
                Err(e)
            }
        }
    }

    /// Runs `f` on the driver, or reports that `init` has not run.
    pub fn with<R>(
        &self,
        f: impl FnOnce(&T) -> Result<R, ProviderError>,
    ) -> Result<R, ProviderError> {
        let slot = self.0.try_borrow().map_err(|_| busy())?;
        match slot.as_ref() {
            Some(driver) => f(driver),
            None => Err(ProviderError::Permanent(NOT_INITIALISED.to_string())),
        }
    }

    /// Runs an infallible function (`load-balancer.name`) on the driver. The WIT gives it no
    /// error channel, so a call before `init` traps with the same message rather than returning a
    /// made-up name.
    pub fn with_infallible<R>(&self, f: impl FnOnce(&T) -> R) -> R {
        match self.0.try_borrow().ok().as_ref().and_then(|s| s.as_ref()) {
            Some(driver) => f(driver),
            None => panic!("{NOT_INITIALISED}"),
        }
    }
}

impl<T> Default for DriverCell<T> {
    fn default() -> Self {
        Self::new()
    }
}

// Only reachable if a driver re-enters the SDK glue from inside a call, which the component
// model does not allow; reported rather than panicking.
fn busy() -> ProviderError {
    ProviderError::Permanent("driver is busy with another call (re-entrant call)".to_string())
}

/// Implements the generated `provider` guest trait. Internal to [`export_driver!`].
#[doc(hidden)]
#[macro_export]
macro_rules! __wasm_ccm_impl_provider {
    ($driver:ty, $exports:ident, $cell:ident) => {
        impl $crate::bindings::exports::wasm_ccm::provider::provider::Guest for $exports {
            fn info() -> $crate::types::ProviderInfo {
                <$driver as $crate::Provider>::info()
            }
            fn init(
                ctx: $crate::types::Context,
                config: ::std::vec::Vec<u8>,
                env: ::std::vec::Vec<(::std::string::String, ::std::string::String)>,
            ) -> ::core::result::Result<(), $crate::types::ProviderError> {
                let driver = <$driver as $crate::Provider>::init(ctx, config, env);
                $cell.with(|cell| cell.set(driver))
            }
            fn housekeeping() -> ::core::result::Result<(), $crate::types::ProviderError> {
                $cell.with(|cell| cell.with(|d| <$driver as $crate::Provider>::housekeeping(d)))
            }
        }
        // Every world exports `environment` since 0.2.1; it belongs to `Provider` in the SDK.
        impl $crate::bindings::exports::wasm_ccm::provider::environment::Guest for $exports {
            fn plain_variables() -> ::core::option::Option<::std::vec::Vec<::std::string::String>> {
                <$driver as $crate::Provider>::plain_env()
            }
        }
    };
}

/// Implements the generated `instances` guest trait. Internal to [`export_driver!`].
#[doc(hidden)]
#[macro_export]
macro_rules! __wasm_ccm_impl_instances {
    ($driver:ty, $exports:ident, $cell:ident) => {
        impl $crate::bindings::exports::wasm_ccm::provider::instances::Guest for $exports {
            fn instance_exists(
                node: $crate::types::Node,
            ) -> ::core::result::Result<bool, $crate::types::ProviderError> {
                $cell.with(|cell| {
                    cell.with(|d| <$driver as $crate::Instances>::instance_exists(d, &node))
                })
            }
            fn instance_shutdown(
                node: $crate::types::Node,
            ) -> ::core::result::Result<bool, $crate::types::ProviderError> {
                $cell.with(|cell| {
                    cell.with(|d| <$driver as $crate::Instances>::instance_shutdown(d, &node))
                })
            }
            fn instance_metadata(
                node: $crate::types::Node,
            ) -> ::core::result::Result<$crate::types::InstanceMetadata, $crate::types::ProviderError>
            {
                $cell.with(|cell| {
                    cell.with(|d| <$driver as $crate::Instances>::instance_metadata(d, &node))
                })
            }
        }
        // Every world exports `instance-listing` since 0.2.2; it belongs to `Instances` in the
        // SDK, whose default answers `not-implemented`.
        impl $crate::bindings::exports::wasm_ccm::provider::instance_listing::Guest for $exports {
            fn list_instances(
                page: ::core::option::Option<::std::string::String>,
            ) -> ::core::result::Result<$crate::types::InstancePage, $crate::types::ProviderError>
            {
                $cell.with(|cell| {
                    cell.with(|d| <$driver as $crate::Instances>::list_instances(d, page))
                })
            }
        }
    };
}

/// Implements the generated `load-balancer` guest trait. Internal to [`export_driver!`].
#[doc(hidden)]
#[macro_export]
macro_rules! __wasm_ccm_impl_load_balancer {
    ($driver:ty, $exports:ident, $cell:ident) => {
        impl $crate::bindings::exports::wasm_ccm::provider::load_balancer::Guest for $exports {
            fn get(
                service: $crate::types::Service,
            ) -> ::core::result::Result<
                ::core::option::Option<::std::vec::Vec<$crate::types::Ingress>>,
                $crate::types::ProviderError,
            > {
                $cell
                    .with(|cell| cell.with(|d| <$driver as $crate::LoadBalancer>::get(d, &service)))
            }
            fn name(service: $crate::types::Service) -> ::std::string::String {
                $cell.with(|cell| {
                    cell.with_infallible(|d| <$driver as $crate::LoadBalancer>::name(d, &service))
                })
            }
            fn ensure(
                service: $crate::types::Service,
                nodes: $crate::types::NodeSet,
            ) -> ::core::result::Result<$crate::types::EnsureResult, $crate::types::ProviderError>
            {
                let nodes = $crate::cluster::nodes_of(&nodes);
                $cell.with(|cell| {
                    cell.with(|d| <$driver as $crate::LoadBalancer>::ensure(d, &service, &nodes))
                })
            }
            fn update(
                service: $crate::types::Service,
                nodes: $crate::types::NodeSet,
            ) -> ::core::result::Result<(), $crate::types::ProviderError> {
                let nodes = $crate::cluster::nodes_of(&nodes);
                $cell.with(|cell| {
                    cell.with(|d| <$driver as $crate::LoadBalancer>::update(d, &service, &nodes))
                })
            }
            fn delete(
                service: $crate::types::Service,
            ) -> ::core::result::Result<(), $crate::types::ProviderError> {
                $cell.with(|cell| {
                    cell.with(|d| <$driver as $crate::LoadBalancer>::delete(d, &service))
                })
            }
        }
    };
}

/// Implements the generated `routes` guest trait. Internal to [`export_driver!`].
#[doc(hidden)]
#[macro_export]
macro_rules! __wasm_ccm_impl_routes {
    ($driver:ty, $exports:ident, $cell:ident) => {
        impl $crate::bindings::exports::wasm_ccm::provider::routes::Guest for $exports {
            fn list() -> ::core::result::Result<
                ::std::vec::Vec<$crate::types::Route>,
                $crate::types::ProviderError,
            > {
                $cell.with(|cell| cell.with(|d| <$driver as $crate::Routes>::list(d)))
            }
            fn create(
                name_hint: ::std::string::String,
                route: $crate::types::Route,
            ) -> ::core::result::Result<(), $crate::types::ProviderError> {
                $cell.with(|cell| {
                    cell.with(|d| <$driver as $crate::Routes>::create(d, &name_hint, &route))
                })
            }
            fn delete(
                route: $crate::types::Route,
            ) -> ::core::result::Result<(), $crate::types::ProviderError> {
                $cell.with(|cell| cell.with(|d| <$driver as $crate::Routes>::delete(d, &route)))
            }
        }
    };
}

/// Exports a driver type as the component's implementation of the selected world.
///
/// `$driver` implements [`Provider`](crate::Provider) and [`Instances`](crate::Instances), plus
/// [`LoadBalancer`](crate::LoadBalancer) with the `load-balancer` feature and
/// [`Routes`](crate::Routes) with the `routes` feature. Invoke it once, at the top level of the
/// driver's crate:
///
/// ```ignore
/// wasm_ccm_sdk::export_driver!(MyDriver);
/// ```
///
/// Every call before a successful `init` fails with `permanent("driver not initialised: …")`;
/// a second `init` replaces the driver value.
#[cfg(feature = "routes")]
#[macro_export]
macro_rules! export_driver {
    ($driver:ty) => {
        const _: () = {
            ::std::thread_local! {
                static __WASM_CCM_DRIVER: $crate::__private::DriverCell<$driver> =
                    const { $crate::__private::DriverCell::new() };
            }
            // Never constructed: wit-bindgen's glue only names the type.
            #[allow(dead_code)]
            struct __WasmCcmExports;
            $crate::__wasm_ccm_impl_provider!($driver, __WasmCcmExports, __WASM_CCM_DRIVER);
            $crate::__wasm_ccm_impl_instances!($driver, __WasmCcmExports, __WASM_CCM_DRIVER);
            // Natively the glue is only type-checked, and Cargo unifies the SDK's features across
            // the workspace: a load-balancer driver tested next to a full driver sees the full
            // world. So the optional interfaces are only wired where they are exported, on wasm,
            // where each driver is built alone with its own features.
            #[cfg(target_arch = "wasm32")]
            $crate::__wasm_ccm_impl_load_balancer!($driver, __WasmCcmExports, __WASM_CCM_DRIVER);
            #[cfg(target_arch = "wasm32")]
            $crate::__wasm_ccm_impl_routes!($driver, __WasmCcmExports, __WASM_CCM_DRIVER);
            // The exported symbols' names (`wasm-ccm:provider/…#…`) only link on wasm; elsewhere
            // the glue above is still type-checked, so `cargo check`/`clippy`/`test` work natively.
            #[cfg(target_arch = "wasm32")]
            $crate::bindings::__wasm_ccm_export_world!(__WasmCcmExports with_types_in $crate::bindings);
        };
    };
}

/// Exports a driver type as the component's implementation of the selected world.
///
/// `$driver` implements [`Provider`](crate::Provider), [`Instances`](crate::Instances) and
/// [`LoadBalancer`](crate::LoadBalancer). See the `routes` feature for routes.
#[cfg(all(feature = "load-balancer", not(feature = "routes")))]
#[macro_export]
macro_rules! export_driver {
    ($driver:ty) => {
        const _: () = {
            ::std::thread_local! {
                static __WASM_CCM_DRIVER: $crate::__private::DriverCell<$driver> =
                    const { $crate::__private::DriverCell::new() };
            }
            // Never constructed: wit-bindgen's glue only names the type.
            #[allow(dead_code)]
            struct __WasmCcmExports;
            $crate::__wasm_ccm_impl_provider!($driver, __WasmCcmExports, __WASM_CCM_DRIVER);
            $crate::__wasm_ccm_impl_instances!($driver, __WasmCcmExports, __WASM_CCM_DRIVER);
            // Natively the glue is only type-checked, and Cargo unifies the SDK's features across
            // the workspace: a load-balancer driver tested next to a full driver sees the full
            // world. So the optional interfaces are only wired where they are exported, on wasm,
            // where each driver is built alone with its own features.
            #[cfg(target_arch = "wasm32")]
            $crate::__wasm_ccm_impl_load_balancer!($driver, __WasmCcmExports, __WASM_CCM_DRIVER);
            // The exported symbols' names (`wasm-ccm:provider/…#…`) only link on wasm; elsewhere
            // the glue above is still type-checked, so `cargo check`/`clippy`/`test` work natively.
            #[cfg(target_arch = "wasm32")]
            $crate::bindings::__wasm_ccm_export_world!(__WasmCcmExports with_types_in $crate::bindings);
        };
    };
}

/// Exports a driver type as the component's implementation of the selected world.
///
/// `$driver` implements [`Provider`](crate::Provider) and [`Instances`](crate::Instances)
/// (the `instances-driver` world: the SDK was built without the `load-balancer` feature).
#[cfg(not(feature = "load-balancer"))]
#[macro_export]
macro_rules! export_driver {
    ($driver:ty) => {
        const _: () = {
            ::std::thread_local! {
                static __WASM_CCM_DRIVER: $crate::__private::DriverCell<$driver> =
                    const { $crate::__private::DriverCell::new() };
            }
            // Never constructed: wit-bindgen's glue only names the type.
            #[allow(dead_code)]
            struct __WasmCcmExports;
            $crate::__wasm_ccm_impl_provider!($driver, __WasmCcmExports, __WASM_CCM_DRIVER);
            $crate::__wasm_ccm_impl_instances!($driver, __WasmCcmExports, __WASM_CCM_DRIVER);
            // The exported symbols' names (`wasm-ccm:provider/…#…`) only link on wasm; elsewhere
            // the glue above is still type-checked, so `cargo check`/`clippy`/`test` work natively.
            #[cfg(target_arch = "wasm32")]
            $crate::bindings::__wasm_ccm_export_world!(__WasmCcmExports with_types_in $crate::bindings);
        };
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_before_init_are_refused() {
        let cell: DriverCell<u32> = DriverCell::new();
        let err = cell.with(|v| Ok(*v)).unwrap_err();
        assert_eq!(err, ProviderError::Permanent(NOT_INITIALISED.to_string()));
    }

    #[test]
    fn init_replaces_and_failed_init_clears() {
        let cell: DriverCell<u32> = DriverCell::new();
        cell.set(Ok(1)).unwrap();
        cell.set(Ok(2)).unwrap();
        assert_eq!(cell.with(|v| Ok(*v)), Ok(2));
        let e = ProviderError::invalid_config("x");
        assert_eq!(cell.set(Err(e.clone())), Err(e));
        assert!(cell.with(|v| Ok(*v)).is_err());
    }
}
