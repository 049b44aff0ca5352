//! Conversions of the request and response messages (see the parent module's conventions).

use super::{
    ConvertError, Result, each, metadata_from_proto, metadata_to_proto, opt, state_from_proto,
    state_to_proto, timestamp_from_proto, timestamp_to_proto,
};
use crate::grpc::proto;
use crate::v1;

impl From<v1::AuthenticationInfo> for proto::AuthenticationInfo {
    fn from(a: v1::AuthenticationInfo) -> Self {
        Self {
            scheme: a.scheme,
            credentials: a.credentials.unwrap_or_default(),
        }
    }
}

impl From<proto::AuthenticationInfo> for v1::AuthenticationInfo {
    fn from(a: proto::AuthenticationInfo) -> Self {
        Self {
            scheme: a.scheme,
            credentials: opt(a.credentials),
        }
    }
}

impl From<v1::TaskPushNotificationConfig> for proto::TaskPushNotificationConfig {
    fn from(c: v1::TaskPushNotificationConfig) -> Self {
        Self {
            tenant: c.tenant.unwrap_or_default(),
            id: c.id.unwrap_or_default(),
            task_id: c.task_id.unwrap_or_default(),
            url: c.url,
            token: c.token.unwrap_or_default(),
            authentication: c.authentication.map(Into::into),
        }
    }
}

impl From<proto::TaskPushNotificationConfig> for v1::TaskPushNotificationConfig {
    fn from(c: proto::TaskPushNotificationConfig) -> Self {
        Self {
            tenant: opt(c.tenant),
            id: opt(c.id),
            task_id: opt(c.task_id),
            url: c.url,
            token: opt(c.token),
            authentication: c.authentication.map(Into::into),
        }
    }
}

impl From<v1::SendMessageConfiguration> for proto::SendMessageConfiguration {
    fn from(c: v1::SendMessageConfiguration) -> Self {
        Self {
            accepted_output_modes: c.accepted_output_modes,
            task_push_notification_config: c.task_push_notification_config.map(Into::into),
            history_length: c.history_length,
            return_immediately: c.return_immediately,
        }
    }
}

impl From<proto::SendMessageConfiguration> for v1::SendMessageConfiguration {
    fn from(c: proto::SendMessageConfiguration) -> Self {
        Self {
            accepted_output_modes: c.accepted_output_modes,
            task_push_notification_config: c.task_push_notification_config.map(Into::into),
            history_length: c.history_length,
            return_immediately: c.return_immediately,
        }
    }
}

impl TryFrom<v1::SendMessageRequest> for proto::SendMessageRequest {
    type Error = ConvertError;
    fn try_from(r: v1::SendMessageRequest) -> Result<Self> {
        Ok(Self {
            tenant: r.tenant.unwrap_or_default(),
            message: Some(r.message.try_into()?),
            configuration: r.configuration.map(Into::into),
            metadata: metadata_to_proto(r.metadata),
        })
    }
}

impl TryFrom<proto::SendMessageRequest> for v1::SendMessageRequest {
    type Error = ConvertError;
    fn try_from(r: proto::SendMessageRequest) -> Result<Self> {
        Ok(Self {
            tenant: opt(r.tenant),
            message: r
                .message
                .ok_or(ConvertError::Missing("message"))?
                .try_into()?,
            configuration: r.configuration.map(Into::into),
            metadata: metadata_from_proto(r.metadata),
        })
    }
}

impl From<v1::GetTaskRequest> for proto::GetTaskRequest {
    fn from(r: v1::GetTaskRequest) -> Self {
        Self {
            tenant: r.tenant.unwrap_or_default(),
            id: r.id,
            history_length: r.history_length,
        }
    }
}

impl From<proto::GetTaskRequest> for v1::GetTaskRequest {
    fn from(r: proto::GetTaskRequest) -> Self {
        Self {
            tenant: opt(r.tenant),
            id: r.id,
            history_length: r.history_length,
        }
    }
}

impl TryFrom<v1::ListTasksRequest> for proto::ListTasksRequest {
    type Error = ConvertError;
    fn try_from(r: v1::ListTasksRequest) -> Result<Self> {
        Ok(Self {
            tenant: r.tenant.unwrap_or_default(),
            context_id: r.context_id.unwrap_or_default(),
            status: r.status.map_or(0, state_to_proto),
            page_size: r.page_size,
            page_token: r.page_token.unwrap_or_default(),
            history_length: r.history_length,
            status_timestamp_after: r
                .status_timestamp_after
                .map(|t| timestamp_to_proto("statusTimestampAfter", &t))
                .transpose()?,
            include_artifacts: r.include_artifacts,
        })
    }
}

impl TryFrom<proto::ListTasksRequest> for v1::ListTasksRequest {
    type Error = ConvertError;
    fn try_from(r: proto::ListTasksRequest) -> Result<Self> {
        let status = state_from_proto("status", r.status)?;
        Ok(Self {
            tenant: opt(r.tenant),
            context_id: opt(r.context_id),
            status: (status != v1::TaskState::Unspecified).then_some(status),
            page_size: r.page_size,
            page_token: opt(r.page_token),
            history_length: r.history_length,
            status_timestamp_after: r
                .status_timestamp_after
                .map(|t| timestamp_from_proto("statusTimestampAfter", t))
                .transpose()?,
            include_artifacts: r.include_artifacts,
        })
    }
}

impl TryFrom<v1::ListTasksResponse> for proto::ListTasksResponse {
    type Error = ConvertError;
    fn try_from(r: v1::ListTasksResponse) -> Result<Self> {
        Ok(Self {
            tasks: each(r.tasks)?,
            next_page_token: r.next_page_token,
            page_size: r.page_size,
            total_size: r.total_size,
        })
    }
}

impl TryFrom<proto::ListTasksResponse> for v1::ListTasksResponse {
    type Error = ConvertError;
    fn try_from(r: proto::ListTasksResponse) -> Result<Self> {
        Ok(Self {
            tasks: each(r.tasks)?,
            next_page_token: r.next_page_token,
            page_size: r.page_size,
            total_size: r.total_size,
        })
    }
}

impl From<v1::CancelTaskRequest> for proto::CancelTaskRequest {
    fn from(r: v1::CancelTaskRequest) -> Self {
        Self {
            tenant: r.tenant.unwrap_or_default(),
            id: r.id,
            metadata: metadata_to_proto(r.metadata),
        }
    }
}

impl From<proto::CancelTaskRequest> for v1::CancelTaskRequest {
    fn from(r: proto::CancelTaskRequest) -> Self {
        Self {
            tenant: opt(r.tenant),
            id: r.id,
            metadata: metadata_from_proto(r.metadata),
        }
    }
}

impl From<v1::SubscribeToTaskRequest> for proto::SubscribeToTaskRequest {
    fn from(r: v1::SubscribeToTaskRequest) -> Self {
        Self {
            tenant: r.tenant.unwrap_or_default(),
            id: r.id,
        }
    }
}

impl From<proto::SubscribeToTaskRequest> for v1::SubscribeToTaskRequest {
    fn from(r: proto::SubscribeToTaskRequest) -> Self {
        Self {
            tenant: opt(r.tenant),
            id: r.id,
        }
    }
}
