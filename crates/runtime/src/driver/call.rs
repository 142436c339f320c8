//! The calls of a loaded driver: one method per export function (`typed_call!`,
//! `node_set_call!`), each converting its arguments to the WIT's generated types and its answer
//! back to the host model (`crate::wit`), and the classification of what went wrong when a
//! guest stopped (trap, deadline, out of memory).

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::handle::Driver;
use crate::call::{CallScope, Outcome, SharedNodes};
use crate::error::CallError;
use crate::model::types::{
    EnsureResult, Ingress, InstanceMetadata, InstancePage, Node, ProviderError, ProviderInfo,
    Route, Service,
};
use crate::wit::Convert;
use crate::wit::v0_2::ToWit;

/// The body of `load-balancer.ensure`/`update`: the service and the node-set record go in, and
/// the set is the call's `cluster.nodes` answer.
macro_rules! node_set_call {
    ($self:ident, $function:literal, $call:ident, $service:ident, $nodes:ident, $scope:ident -> $ret:ty) => {{
        if let Err(e) = $self.inner.require(
            $self.inner.compiled.surface.exports.load_balancer,
            "load-balancer",
            $function,
        ) {
            return Outcome::failed(e, Duration::ZERO);
        }
        $self.inner.host.lowered.fetch_add(
            crate::lowered::Lowered::lowered_bytes($service),
            Ordering::Relaxed,
        );
        let (service, set) = ($service.to_wit(), $nodes.record().into());
        $self
            .inner
            .invoke_with_nodes($function, $scope, Some($nodes), move |slot| {
                Box::pin(async move {
                    let Some(guest) = slot.guests.load_balancer.as_ref() else {
                        return Ok(Err(ProviderError::NotImplemented));
                    };
                    let answer = guest.$call(&mut slot.store, &service, set).await;
                    answer.map(|r| -> Result<$ret, ProviderError> { r.convert() })
                })
            })
            .await
    }};
}

macro_rules! typed_call {
    ($(#[$doc:meta])* $name:ident, $iface:ident, $iface_name:literal, $fn_name:literal, $call:ident, ($($arg:ident: $ty:ty),*) -> $ret:ty) => {
        $(#[$doc])*
        pub async fn $name(&self, $($arg: $ty,)* scope: &CallScope) -> Outcome<$ret> {
            let function = concat!($iface_name, ".", $fn_name);
            if let Err(e) = self.inner.require(self.inner.compiled.surface.exports.$iface, $iface_name, function) {
                return Outcome::failed(e, Duration::ZERO);
            }
            let lowered = 0 $(+ crate::lowered::Lowered::lowered_bytes($arg))*;
            self.inner.host.lowered.fetch_add(lowered, Ordering::Relaxed);
            $(let $arg = $arg.to_wit();)*
            self.inner
                .invoke(function, scope, move |slot| {
                    Box::pin(async move {
                        let Some(guest) = slot.guests.$iface.as_ref() else {
                            return Ok(Err(ProviderError::NotImplemented));
                        };
                        let answer = guest.$call(&mut slot.store, $(&$arg),*).await;
                        answer.map(|r| -> Result<$ret, ProviderError> { r.convert() })
                    })
                })
                .await
        }
    };
}

impl Driver {
    /// Calls `provider.housekeeping`.
    pub async fn housekeeping(&self, scope: &CallScope) -> Outcome<()> {
        self.inner
            .invoke("provider.housekeeping", scope, |slot| {
                Box::pin(async move {
                    let answer = slot
                        .guests
                        .provider
                        .call_housekeeping(&mut slot.store)
                        .await;
                    answer.map(|r| -> Result<(), ProviderError> { r.convert() })
                })
            })
            .await
    }

    /// Calls `provider.init` again in a pooled instance (already initialised by the host when it
    /// was made): only the dynamic call names it, for a driver author trying `init` by hand.
    pub(super) async fn init_call(
        &self,
        context: crate::model::types::Context,
        config: Vec<u8>,
        env: Vec<(String, String)>,
        scope: &CallScope,
    ) -> Outcome<()> {
        let context = context.to_wit();
        self.inner
            .invoke("provider.init", scope, move |slot| {
                Box::pin(async move {
                    let answer = slot
                        .guests
                        .provider
                        .call_init(&mut slot.store, &context, &config, &env)
                        .await;
                    answer.map(|r| -> Result<(), ProviderError> { r.convert() })
                })
            })
            .await
    }

    /// Calls `provider.info` in a pooled instance (the cached copy is [`Driver::info`]); used to
    /// measure the cost of a call that does no work.
    pub async fn info_call(&self, scope: &CallScope) -> Outcome<ProviderInfo> {
        self.inner
            .invoke("provider.info", scope, |slot| {
                Box::pin(async move {
                    let info = slot.guests.provider.call_info(&mut slot.store).await;
                    info.map(|i| Ok(i.into()))
                })
            })
            .await
    }

    typed_call!(
        /// `instances.instance-exists`.
        instance_exists, instances, "instances", "instance-exists", call_instance_exists, (node: &Node) -> bool);
    typed_call!(
        /// `instances.instance-shutdown`.
        instance_shutdown, instances, "instances", "instance-shutdown", call_instance_shutdown, (node: &Node) -> bool);
    typed_call!(
        /// `instances.instance-metadata`.
        instance_metadata, instances, "instances", "instance-metadata", call_instance_metadata, (node: &Node) -> InstanceMetadata);
    /// `instance-listing.list-instances` (contract 0.2.2): one page of the cluster's instances,
    /// `page` `None` for the first. A driver without the export answers `not-implemented`, as
    /// the SDKs' default does, so callers need one rule for both.
    pub async fn list_instances(
        &self,
        page: Option<&str>,
        scope: &CallScope,
    ) -> Outcome<InstancePage> {
        if !self.inner.compiled.surface.instance_listing {
            let not = CallError::Provider(ProviderError::NotImplemented);
            return Outcome::failed(not, Duration::ZERO);
        }
        let page = page.map(str::to_string);
        self.inner
            .invoke("instance-listing.list-instances", scope, move |slot| {
                Box::pin(async move {
                    let Some(guest) = slot.guests.instance_listing.as_ref() else {
                        return Ok(Err(ProviderError::NotImplemented));
                    };
                    let answer = guest
                        .call_list_instances(&mut slot.store, page.as_deref())
                        .await;
                    answer.map(|r| -> Result<InstancePage, ProviderError> { r.convert() })
                })
            })
            .await
    }

    typed_call!(
        /// `load-balancer.get`.
        load_balancer_get, load_balancer, "load-balancer", "get", call_get, (service: &Service) -> Option<Vec<Ingress>>);
    /// `load-balancer.ensure` with a shared node set: the controllers convert the node set once
    /// per change and hand every call the same [`SharedNodes`], so a driver copies it once per
    /// change (the guest fetches it with `cluster.nodes` only for a generation it lacks).
    pub async fn load_balancer_ensure_shared(
        &self,
        service: &Service,
        nodes: &SharedNodes,
        scope: &CallScope,
    ) -> Outcome<EnsureResult> {
        node_set_call!(
            self,
            "load-balancer.ensure",
            call_ensure,
            service,
            nodes,
            scope -> EnsureResult
        )
    }

    /// `load-balancer.update` with a shared node set (see
    /// [`Driver::load_balancer_ensure_shared`]).
    pub async fn load_balancer_update_shared(
        &self,
        service: &Service,
        nodes: &SharedNodes,
        scope: &CallScope,
    ) -> Outcome<()> {
        node_set_call!(
            self,
            "load-balancer.update",
            call_update,
            service,
            nodes,
            scope -> ()
        )
    }

    /// `load-balancer.ensure` with a node set of its own (a new generation each call; the
    /// controllers use [`Driver::load_balancer_ensure_shared`]).
    pub async fn load_balancer_ensure(
        &self,
        service: &Service,
        nodes: &[Node],
        scope: &CallScope,
    ) -> Outcome<EnsureResult> {
        self.load_balancer_ensure_shared(service, &SharedNodes::new(nodes), scope)
            .await
    }

    /// `load-balancer.update` with a node set of its own (see
    /// [`Driver::load_balancer_ensure`]).
    pub async fn load_balancer_update(
        &self,
        service: &Service,
        nodes: &[Node],
        scope: &CallScope,
    ) -> Outcome<()> {
        self.load_balancer_update_shared(service, &SharedNodes::new(nodes), scope)
            .await
    }
    typed_call!(
        /// `load-balancer.delete`.
        load_balancer_delete, load_balancer, "load-balancer", "delete", call_delete, (service: &Service) -> ());
    typed_call!(
        /// `routes.list`.
        routes_list, routes, "routes", "list", call_list, () -> Vec<Route>);
    typed_call!(
        /// `routes.create`.
        routes_create, routes, "routes", "create", call_create, (name_hint: &str, route: &Route) -> ());
    typed_call!(
        /// `routes.delete`.
        routes_delete, routes, "routes", "delete", call_delete, (route: &Route) -> ());

    /// `load-balancer.name` (it cannot fail in the driver; host failures still can).
    pub async fn load_balancer_name(
        &self,
        service: &Service,
        scope: &CallScope,
    ) -> Outcome<String> {
        let function = "load-balancer.name";
        if let Err(e) = self.inner.require(
            self.inner.compiled.surface.exports.load_balancer,
            "load-balancer",
            function,
        ) {
            return Outcome::failed(e, Duration::ZERO);
        }
        let service = service.to_wit();
        self.inner
            .invoke(function, scope, move |slot| {
                Box::pin(async move {
                    let Some(guest) = slot.guests.load_balancer.as_ref() else {
                        return Ok(Err(ProviderError::NotImplemented));
                    };
                    guest.call_name(&mut slot.store, &service).await.map(Ok)
                })
            })
            .await
    }
}
