//! Authentication of a measured session's connection: trust, password, md5 and
//! SCRAM-SHA-256(-PLUS), with the target's channel_binding, never a password in plaintext
//! where TLS was asked for.

use fallible_iterator::FallibleIterator;
use postgres_protocol::authentication::md5_hash;
use postgres_protocol::authentication::sasl::{
    ChannelBinding, SCRAM_SHA_256, SCRAM_SHA_256_PLUS, ScramSha256,
};
use postgres_protocol::message::backend::Message;
use postgres_protocol::message::frontend;

use super::WireConn;
use super::error::{ConnectError, ServerError};
use super::stream::Stream;
use crate::conn::Target;
use crate::tls::ChannelBindingMode;

impl WireConn {
    pub(super) fn authenticate(
        &mut self,
        target: &Target,
        password: Option<&str>,
    ) -> Result<(), ConnectError> {
        // Never a password in plaintext where TLS was asked for (the connection could not
        // get here without TLS then; this keeps it so).
        if target.tls.mode.requires_tls()
            && !self.stream.is_tls()
            && !matches!(self.stream, Stream::Unix(_))
        {
            return Err(ConnectError::NoTls);
        }
        let binding = target.tls.channel_binding;
        let password = || {
            password
                .map(str::as_bytes)
                .ok_or(ConnectError::PasswordMissing)
        };
        let unbound = || {
            ConnectError::Unsupported(
                "channel binding required, but server authenticated client without channel binding (channel_binding=require)".into(),
            )
        };
        let mut bound = false;
        loop {
            match self.recv()? {
                Message::AuthenticationOk => {
                    if binding == ChannelBindingMode::Require && !bound {
                        return Err(unbound());
                    }
                    return Ok(());
                }
                Message::AuthenticationCleartextPassword => {
                    if binding == ChannelBindingMode::Require {
                        return Err(unbound());
                    }
                    frontend::password_message(password()?, &mut self.wbuf)?;
                    self.send()?;
                }
                Message::AuthenticationMd5Password(body) => {
                    if binding == ChannelBindingMode::Require {
                        return Err(unbound());
                    }
                    let hashed = md5_hash(target.user.as_bytes(), password()?, body.salt());
                    frontend::password_message(hashed.as_bytes(), &mut self.wbuf)?;
                    self.send()?;
                }
                Message::AuthenticationSasl(body) => {
                    let mut mechanisms = body.mechanisms();
                    let (mut scram, mut plus) = (false, false);
                    while let Some(m) = mechanisms
                        .next()
                        .map_err(|e| ConnectError::Protocol(e.to_string()))?
                    {
                        scram |= m == SCRAM_SHA_256;
                        plus |= m == SCRAM_SHA_256_PLUS;
                    }
                    // SCRAM-SHA-256-PLUS binds the authentication to this TLS session
                    // (tls-server-end-point, RFC 5929), where the server offers it.
                    let end_point = self
                        .end_point
                        .clone()
                        .filter(|_| binding != ChannelBindingMode::Disable);
                    let (mechanism, channel) = match end_point {
                        Some(ep) if plus => (SCRAM_SHA_256_PLUS, ChannelBinding::tls_server_end_point(ep)),
                        _ if binding == ChannelBindingMode::Require => return Err(ConnectError::Unsupported(
                            "channel binding is required, but the server did not offer SCRAM-SHA-256-PLUS over this connection (channel_binding=require)".into(),
                        )),
                        Some(_) if scram => (SCRAM_SHA_256, ChannelBinding::unrequested()),
                        _ if scram => (SCRAM_SHA_256, ChannelBinding::unsupported()),
                        _ => return Err(ConnectError::Unsupported(
                            "the server offers no SASL mechanism dbio supports (SCRAM-SHA-256)".into(),
                        )),
                    };
                    bound = mechanism == SCRAM_SHA_256_PLUS;
                    let mut sasl = ScramSha256::new(password()?, channel);
                    frontend::sasl_initial_response(mechanism, sasl.message(), &mut self.wbuf)?;
                    self.send()?;
                    match self.recv()? {
                        Message::AuthenticationSaslContinue(b) => sasl.update(b.data())?,
                        Message::ErrorResponse(e) => {
                            return Err(ConnectError::Server(ServerError::from_body(&e)));
                        }
                        _ => return Err(ConnectError::Protocol("unexpected SASL message".into())),
                    }
                    frontend::sasl_response(sasl.message(), &mut self.wbuf)?;
                    self.send()?;
                    match self.recv()? {
                        Message::AuthenticationSaslFinal(b) => sasl.finish(b.data())?,
                        Message::ErrorResponse(e) => {
                            return Err(ConnectError::Server(ServerError::from_body(&e)));
                        }
                        _ => return Err(ConnectError::Protocol("unexpected SASL message".into())),
                    }
                }
                Message::ErrorResponse(e) => {
                    return Err(ConnectError::Server(ServerError::from_body(&e)));
                }
                _ => {
                    return Err(ConnectError::Unsupported(
                        "the server asks for an authentication method dbio's sessions do not \
                         support (GSSAPI, SSPI or Kerberos); use trust, password, md5 or \
                         scram-sha-256 in pg_hba.conf"
                            .into(),
                    ));
                }
            }
        }
    }
}
